// SPDX-License-Identifier: Apache-2.0
// tools/vkpaged/npy: round trips of every dtype, and a refusal for each kind of bad file.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "npy.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("vkpaged_npy_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path path(const std::string& name) const { return dir_ / name; }

  // A file of raw bytes: a header dict with the given version, then `data_bytes` bytes.
  fs::path raw_file(const std::string& name, const std::string& dict, size_t data_bytes, int major = 1,
                    const std::string& magic = "\x93NUMPY") const {
    std::string bytes = magic;
    bytes.push_back(char(major));
    bytes.push_back(char(0));
    std::string header = dict + "\n";
    const uint32_t len = uint32_t(header.size());
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i) bytes.push_back(char((len >> (8 * i)) & 0xff));
    bytes += header;
    bytes.append(data_bytes, '\x01');
    const auto p = path(name);
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return p;
  }

  // Expects read_npy to refuse the file with `code`, naming the file and saying `problem`.
  void expect_refusal(const fs::path& p, ErrorCode code, const std::string& problem, NpyReadOptions options = {}) {
    try {
      read_npy(p, options);
      ADD_FAILURE() << p << " was read, expected a refusal mentioning '" << problem << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "the message does not name the file: " << e.what();
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

HostTensor random_tensor(DType dtype, Shape shape, uint32_t seed) {
  HostTensor t(dtype, shape);
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(t.data());
  for (size_t i = 0; i < t.bytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  return t;
}

void expect_same(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape()) << a.shape().str() << " vs " << b.shape().str();
  ASSERT_EQ(a.bytes(), b.bytes());
  if (a.bytes() != 0) EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
}

TEST_F(NpyTest, RoundTripsEveryDtype) {
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::u8, DType::i32, DType::u32, DType::i64};
  uint32_t seed = 1;
  for (DType dtype : dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const HostTensor t = random_tensor(dtype, Shape{3, 5, 7}, seed++);
    write_npy(path("a.npy"), t);
    expect_same(read_npy(path("a.npy"), NpyReadOptions{dtype == DType::bf16}), t);
  }
}

TEST_F(NpyTest, RoundTripsEveryRankAndEmptyArrays) {
  const Shape shapes[] = {Shape{}, Shape{4}, Shape{2, 3}, Shape{0}, Shape{3, 0, 2}, Shape{2, 1, 3, 4, 5}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const HostTensor t = random_tensor(DType::f32, shape, 7);
    write_npy(path("a.npy"), t);
    expect_same(read_npy(path("a.npy")), t);
  }
}

TEST_F(NpyTest, Fp8IsWrittenAsBytesAndReadBackAsU8) {
  HostTensor t = random_tensor(DType::fp8_e4m3, Shape{4, 16}, 3);
  write_npy(path("a.npy"), t);
  const HostTensor back = read_npy(path("a.npy"));
  EXPECT_EQ(back.dtype(), DType::u8);
  ASSERT_EQ(back.bytes(), t.bytes());
  EXPECT_EQ(std::memcmp(back.data(), t.data(), t.bytes()), 0);
}

TEST_F(NpyTest, WritesNumpysHeaderLayout) {
  write_npy(path("a.npy"), HostTensor(DType::f16, Shape{2, 3}));
  std::ifstream in(path("a.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data must start 64-byte aligned";
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_NE(bytes.find("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  EXPECT_EQ(bytes.size(), 10 + header_len + 12);
}

TEST_F(NpyTest, ReadsVersions2And3AndNumpyVariants) {
  for (int major : {2, 3}) {
    const auto p = raw_file("v.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8, major);
    const HostTensor t = read_npy(p);
    EXPECT_EQ(t.dtype(), DType::i32);
    EXPECT_EQ(t.shape(), Shape{2});
  }
  // Key order, double quotes, Python 2 longs and no trailing comma are all NumPy-readable.
  const auto p = raw_file("w.npy", "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"|u1\"}", 6);
  const HostTensor t = read_npy(p);
  EXPECT_EQ(t.dtype(), DType::u8);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
}

TEST_F(NpyTest, U2NeedsTheBf16Flag) {
  write_npy(path("b.npy"), HostTensor(DType::bf16, Shape{2}));
  expect_refusal(path("b.npy"), ErrorCode::invalid_argument, "--dtype bf16");
  EXPECT_EQ(read_npy(path("b.npy"), NpyReadOptions{true}).dtype(), DType::bf16);
}

TEST_F(NpyTest, RefusesMissingFilesAndDirectories) {
  expect_refusal(path("missing.npy"), ErrorCode::io_error, "cannot open");
  fs::create_directories(path("dir.npy"));
  expect_refusal(path("dir.npy"), ErrorCode::io_error, "directory");
}

TEST_F(NpyTest, RefusesBadMagicAndShortFiles) {
  expect_refusal(raw_file("m.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, 1, "\x93NUMPZ"),
                 ErrorCode::invalid_argument, "bad magic");
  std::ofstream(path("short.npy"), std::ios::binary) << "\x93NU";
  expect_refusal(path("short.npy"), ErrorCode::invalid_argument, "not an .npy file");
  std::ofstream(path("text.npy"), std::ios::binary) << "hello, this is not numpy";
  expect_refusal(path("text.npy"), ErrorCode::invalid_argument, "bad magic");
}

TEST_F(NpyTest, RefusesUnsupportedVersions) {
  expect_refusal(raw_file("v.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, 4),
                 ErrorCode::invalid_argument, "version 4.0");
}

TEST_F(NpyTest, RefusesTruncatedHeaderAndData) {
  const auto p = raw_file("t.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 15);
  expect_refusal(p, ErrorCode::invalid_argument, "truncated");
  // A header length that runs past the end of the file.
  std::string bytes("\x93NUMPY\x01\x00\xff\x00{'descr'", 17);
  std::ofstream(path("h.npy"), std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  expect_refusal(path("h.npy"), ErrorCode::invalid_argument, "truncated");
}

TEST_F(NpyTest, RefusesTrailingBytes) {
  const auto p = raw_file("t.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 17);
  expect_refusal(p, ErrorCode::invalid_argument, "after the array data");
}

TEST_F(NpyTest, RefusesFortranOrder) {
  const auto p = raw_file("f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
  expect_refusal(p, ErrorCode::invalid_argument, "Fortran");
}

TEST_F(NpyTest, RefusesBigEndian) {
  const auto p = raw_file("b.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  expect_refusal(p, ErrorCode::invalid_argument, "big-endian");
}

TEST_F(NpyTest, RefusesUnknownDtypes) {
  for (const char* descr : {"<f8", "<i2", "|b1", "<c8", "|S4", "<M8[ns]"}) {
    SCOPED_TRACE(descr);
    const auto p = raw_file("u.npy", fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (), }}", descr), 0);
    expect_refusal(p, ErrorCode::invalid_argument, "not supported");
  }
  const auto s = raw_file("s.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4);
  expect_refusal(s, ErrorCode::invalid_argument, "structured");
}

TEST_F(NpyTest, RefusesMalformedHeaders) {
  const std::pair<const char*, const char*> cases[] = {
      {"{'descr': '<f4', 'shape': (1,), }", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, }", "no 'shape'"},
      {"{'fortran_order': False, 'shape': (1,), }", "no 'descr'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", "tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unknown key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", "expected '}'"},
      {"['descr', '<f4']", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "overflow"},
  };
  for (const auto& [dict, problem] : cases) {
    SCOPED_TRACE(dict);
    expect_refusal(raw_file("x.npy", dict, 4), ErrorCode::invalid_argument, problem);
  }
}

TEST_F(NpyTest, RefusesRankAboveFiveAndHugeShapes) {
  expect_refusal(raw_file("r.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1), }", 4),
                 ErrorCode::invalid_argument, "rank 6");
  // Shapes whose byte count overflows, or far exceeds the file, are refused before allocating.
  expect_refusal(raw_file("o.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8),
                 ErrorCode::invalid_argument, "overflows");
  expect_refusal(raw_file("h.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", 8),
                 ErrorCode::invalid_argument, "truncated");
}

TEST_F(NpyTest, WriteReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  write_npy(path("o.npy"), random_tensor(DType::f32, Shape{8}, 1));
  const HostTensor second = random_tensor(DType::f32, Shape{2, 2}, 2);
  write_npy(path("o.npy"), second);
  expect_same(read_npy(path("o.npy")), second);
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";
}

TEST_F(NpyTest, FailedWriteLeavesNothingAndNamesThePath) {
  const auto p = path("no_such_dir") / "o.npy";
  try {
    write_npy(p, HostTensor(DType::f32, Shape{2}));
    ADD_FAILURE() << "writing into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io_error);
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(p));
  // A directory in the way: refused before anything is written; the directory and its contents stay.
  fs::create_directories(path("taken.npy"));
  EXPECT_THROW(write_npy(path("taken.npy"), HostTensor(DType::f32, Shape{2})), Error);
  EXPECT_TRUE(fs::is_directory(path("taken.npy")));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";
}

}  // namespace
}  // namespace vkpaged::cli
