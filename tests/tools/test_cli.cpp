// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend` run as a subprocess (VKPAGED_CLI, else the CLI built beside the tests; the
// test is skipped without either): outputs against the CPU reference, and the contract's answer to bad input:
// a non-zero exit, one line on stderr naming the argument, no output file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attend_inputs.hpp"
#include "bench.hpp"
#include "commands.hpp"
#include "npy.hpp"
#include "support/test_context.hpp"
#include "support/test_paths.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

extern char** environ;

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code = -1;  // 128 + signal when it crashed
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

CliResult run_cli(const std::string& cli, const std::vector<std::string>& args, const fs::path& dir) {
  const fs::path out = dir / "cli_stdout.txt", err = dir / "cli_stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv{const_cast<char*>(cli.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  CliResult r;
  const int spawned = posix_spawn(&pid, cli.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    r.err = "posix_spawn failed";
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

// A random decode case in the contract's layouts: U(-1, 1) values, each sequence's blocks
// drawn from a shuffled pool, unused table entries pointing at arbitrary valid blocks.
struct CaseSpec {
  DType dtype = DType::f32;
  DType cache_dtype = DType::f32;  // = dtype unless fp8
  uint32_t heads = 4;
  uint32_t kv_heads = 4;
  uint32_t head_size = 64;
  uint32_t block_size = 16;
  std::vector<int32_t> lens{0, 1, 15, 16, 17, 300};
  uint32_t spare_blocks = 3;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

DecodeInputs random_inputs(const CaseSpec& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t S = int64_t(c.lens.size()), H = c.heads, Hkv = c.kv_heads, D = c.head_size, B = c.block_size;
  const bool fp8 = is_fp8_dtype(c.cache_dtype);
  const int64_t x = cache_pack_factor(c.cache_dtype);
  int64_t M = 1, used_blocks = 0;
  for (int32_t len : c.lens) {
    M = std::max<int64_t>(M, (len + B - 1) / B);
    used_blocks += (len + B - 1) / B;
  }
  M += 1;  // a padding column the kernel must not read
  const int64_t N = used_blocks + c.spare_blocks;

  DecodeInputs in;
  in.cache_dtype = c.cache_dtype;
  in.query = HostTensor(c.dtype, Shape{S, H, D});
  const DType stored = fp8 ? DType::u8 : c.cache_dtype;
  in.key_cache = HostTensor(stored, Shape{N, Hkv, D / std::max<int64_t>(x, 1), B, x});
  in.value_cache = HostTensor(stored, Shape{N, Hkv, D, B});
  for (size_t i = 0; i < size_t(in.query.numel()); ++i) in.query.set(i, uniform(rng));
  auto fill_cache = [&](HostTensor& cache, float scale) {
    for (size_t i = 0; i < size_t(cache.numel()); ++i) {
      if (fp8)
        store_element(cache.data(), c.cache_dtype, i, uniform(rng) / scale);
      else
        cache.set(i, uniform(rng));
    }
  };
  fill_cache(in.key_cache, c.k_scale);
  fill_cache(in.value_cache, c.v_scale);

  std::vector<int32_t> pool(static_cast<size_t>(N));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  in.block_tables = HostTensor(DType::i32, Shape{S, M});
  in.context_lens = HostTensor(DType::i32, Shape{S});
  size_t next = 0;
  for (int64_t s = 0; s < S; ++s) {
    in.context_lens.as<int32_t>()[s] = c.lens[size_t(s)];
    const int64_t used = (c.lens[size_t(s)] + B - 1) / B;
    for (int64_t j = 0; j < M; ++j)
      in.block_tables.as<int32_t>()[s * M + j] = j < used ? pool[next++] : int32_t(rng() % uint32_t(N));
  }
  return in;
}

double tolerance_of(DType query) { return query == DType::f32 ? 1e-4 : query == DType::f16 ? 3e-3 : 2e-2; }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_ = vkpaged::test::cli_path();
    if (cli_.empty()) GTEST_SKIP() << "no vkpaged CLI: VKPAGED_CLI is not set and none was built beside the tests";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("vkpaged_cli_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  fs::path path(const std::string& name) const { return dir_ / name; }

  // Writes the inputs as .npy files; returns the attend arguments naming them and out.npy.
  std::vector<std::string> write_case(const DecodeInputs& in) {
    write_npy(path("q.npy"), in.query);
    write_npy(path("k.npy"), in.key_cache);
    write_npy(path("v.npy"), in.value_cache);
    write_npy(path("bt.npy"), in.block_tables);
    write_npy(path("cl.npy"), in.context_lens);
    std::vector<std::string> args{"attend", "--query", path("q.npy"), "--key-cache", path("k.npy"),
                                  "--value-cache", path("v.npy"), "--block-tables", path("bt.npy"),
                                  "--context-lens", path("cl.npy"), "--out", path("out.npy")};
    if (!in.alibi_slopes.empty()) {
      write_npy(path("alibi.npy"), in.alibi_slopes);
      args.insert(args.end(), {"--alibi-slopes", path("alibi.npy")});
    }
    if (!in.sinks.empty()) {
      write_npy(path("sinks.npy"), in.sinks);
      args.insert(args.end(), {"--sinks", path("sinks.npy")});
    }
    return args;
  }

  CliResult run(const std::vector<std::string>& args) { return run_cli(cli_, args, dir_); }

  // Runs the CLI on `in` and compares its output with the reference under `options` and `params`.
  void expect_matches_reference(const DecodeInputs& in, const DecodeOptions& options, std::vector<std::string> extra,
                                const DecodeParams& params = {}) {
    auto args = write_case(in);
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
    const HostTensor out = read_npy(path("out.npy"), NpyReadOptions{in.query.dtype() == DType::bf16});
    const DecodeResult expected = reference::decode_attention(in, options, params);
    ASSERT_EQ(out.dtype(), in.query.dtype());
    ASSERT_EQ(out.shape(), in.query.shape());
    const double tolerance = tolerance_of(in.query.dtype());
    double worst = 0;
    for (size_t i = 0; i < size_t(out.numel()); ++i) {
      const double err = std::fabs(out.get(i) - expected.output.get(i));
      worst = std::isfinite(err) ? std::max(worst, err) : INFINITY;
    }
    EXPECT_LE(worst, tolerance) << "max |CLI - reference| over " << out.numel() << " outputs";
  }

  // The contract's answer to bad input: non-zero exit, one line "vkpaged: ..." on stderr that
  // mentions every string of `mentions`, and no output file.
  void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& mentions) {
    const CliResult r = run(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_LT(r.exit_code, 128) << "the CLI crashed: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr:\n" << r.err;
    EXPECT_TRUE(r.err.rfind("vkpaged: ", 0) == 0) << r.err;
    for (const auto& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << "'" << m << "' not in: " << r.err;
    EXPECT_FALSE(fs::exists(path("out.npy"))) << "an output file was left behind";
    for (const auto& entry : fs::directory_iterator(dir_))
      EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << "temporary file left: " << entry.path();
  }

  std::string cli_;
  fs::path dir_;
};

// ---- outputs against the reference ----

TEST_F(CliTest, F32HeadSize64Mha) {
  CaseSpec c;
  expect_matches_reference(random_inputs(c, 1), {}, {});
}

TEST_F(CliTest, F16HeadSize128Gqa4) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::f16;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 128;
  expect_matches_reference(random_inputs(c, 2), {}, {});
}

TEST_F(CliTest, F32HeadSize128Gqa4Block32) {
  CaseSpec c;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 128;
  c.block_size = 32;
  c.lens = {257, 0, 31, 1, 33, 32};
  expect_matches_reference(random_inputs(c, 3), {}, {});
}

TEST_F(CliTest, F16HeadSize64MhaBlock8) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::f16;
  c.block_size = 8;
  c.lens = {7, 8, 9, 0, 1, 400};
  expect_matches_reference(random_inputs(c, 4), {}, {});
}

TEST_F(CliTest, ScaleAlibiSoftcapSinksWindowSplit) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::f16;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {600, 1, 17, 0};
  DecodeInputs in = random_inputs(c, 5);
  in.alibi_slopes = HostTensor(DType::f32, Shape{8});
  in.sinks = HostTensor(DType::f32, Shape{8});
  for (size_t h = 0; h < 8; ++h) {
    in.alibi_slopes.set(h, std::exp2(-double(h + 1)));
    in.sinks.set(h, 0.25 * double(h) - 1.0);
  }
  DecodeOptions o;
  DecodeParams p;
  p.scale = 0.2f;
  p.softcap = 1.5f;
  o.sliding_window = 100;
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  expect_matches_reference(in, o,
                           {"--scale", "0.2", "--softcap", "1.5", "--sliding-window", "100", "--split", "split",
                            "--partition-tokens", "256"},
                           p);
}

// --kernel reaches DecodeOptions::kernel; the scalar kernel runs on every device.
TEST_F(CliTest, KernelChoice) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::f16;
  c.heads = 8;
  c.kv_heads = 2;
  DecodeOptions o;
  o.kernel = DecodeKernel::scalar;
  expect_matches_reference(random_inputs(c, 14), o, {"--kernel", "scalar"});
  o.kernel = DecodeKernel::automatic;
  expect_matches_reference(random_inputs(c, 15), o, {"--kernel", "auto"});
}

TEST_F(CliTest, Fp8CachesWithScales) {
  CaseSpec c;
  c.dtype = DType::f16;
  c.cache_dtype = DType::fp8_e4m3;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 128;
  c.k_scale = 0.5f;
  c.v_scale = 2.0f;
  DecodeParams p;
  p.k_scale = 0.5f;
  p.v_scale = 2.0f;
  expect_matches_reference(random_inputs(c, 6), {}, {"--kv-dtype", "fp8_e4m3", "--k-scale", "0.5", "--v-scale", "2"}, p);
  c.cache_dtype = DType::fp8_e5m2;
  expect_matches_reference(random_inputs(c, 7), {}, {"--kv-dtype", "fp8_e5m2", "--k-scale", "0.5", "--v-scale", "2"}, p);
}

TEST_F(CliTest, Bf16WithDtypeFlag) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::bf16;
  c.heads = 8;
  c.kv_heads = 8;
  expect_matches_reference(random_inputs(c, 8), {}, {"--dtype", "bf16"});
}

TEST_F(CliTest, CpuDeviceAndOtherIndexDtypes) {
  CaseSpec c;
  DecodeInputs in = random_inputs(c, 9);
  // u32 block tables and i64 context lengths are accepted too.
  HostTensor tables(DType::u32, in.block_tables.shape());
  for (size_t i = 0; i < size_t(tables.numel()); ++i) tables.as<uint32_t>()[i] = uint32_t(in.block_tables.as<int32_t>()[i]);
  HostTensor lens(DType::i64, in.context_lens.shape());
  for (size_t i = 0; i < size_t(lens.numel()); ++i) lens.as<int64_t>()[i] = in.context_lens.as<int32_t>()[i];
  in.block_tables = tables;
  in.context_lens = lens;
  expect_matches_reference(in, {}, {"--device", "cpu"});
}

// ---- bad input ----

class CliBadInputTest : public CliTest {
 protected:
  // A small valid f32 case; each test breaks one thing.
  DecodeInputs base(uint32_t heads = 4, uint32_t kv_heads = 4, uint32_t head_size = 64, uint32_t block_size = 16) {
    CaseSpec c;
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.head_size = head_size;
    c.block_size = block_size;
    c.lens = {5, 40};
    return random_inputs(c, 11);
  }
};

TEST_F(CliBadInputTest, ValueCacheShapeMismatch) {
  DecodeInputs in = base();
  const auto& v = in.value_cache.shape();
  in.value_cache = HostTensor(DType::f32, Shape{v[0], v[1], v[2], v[3] / 2});
  expect_refused(write_case(in), {"--value-cache", "shape"});
}

TEST_F(CliBadInputTest, KeyCacheHeadSizeDisagreesWithQuery) {
  DecodeInputs in = base();
  in.query = HostTensor(DType::f32, Shape{2, 4, 128});
  expect_refused(write_case(in), {"--key-cache", "128"});
}

TEST_F(CliBadInputTest, BlockTablesRowsDisagreeWithQuery) {
  DecodeInputs in = base();
  in.block_tables = HostTensor(DType::i32, Shape{3, in.block_tables.shape()[1]});
  expect_refused(write_case(in), {"--block-tables", "3"});
}

TEST_F(CliBadInputTest, HeadsNotAMultipleOfKvHeads) {
  DecodeInputs in = base(/*heads=*/4, /*kv_heads=*/4);
  in.query = HostTensor(DType::f32, Shape{2, 6, 64});
  expect_refused(write_case(in), {"num_heads", "6"});
}

TEST_F(CliBadInputTest, UnsupportedHeadSize) {
  expect_refused(write_case(base(4, 4, /*head_size=*/20)), {"--query", "head_size", "20"});
}

TEST_F(CliBadInputTest, UnsupportedBlockSize) {
  expect_refused(write_case(base(4, 4, 64, /*block_size=*/12)), {"--key-cache", "block_size", "12"});
}

TEST_F(CliBadInputTest, BlockIdAtOrPastN) {
  DecodeInputs in = base();
  const int64_t N = in.key_cache.shape()[0];
  in.block_tables.as<int32_t>()[0] = int32_t(N);
  expect_refused(write_case(in), {"--block-tables", std::to_string(N)});
}

TEST_F(CliBadInputTest, ContextLengthPastMTimesB) {
  DecodeInputs in = base();
  const int64_t cap = in.block_tables.shape()[1] * 16;
  in.context_lens.as<int32_t>()[1] = int32_t(cap + 1);
  expect_refused(write_case(in), {"--context-lens", std::to_string(cap + 1)});
}

TEST_F(CliBadInputTest, NegativeContextLength) {
  DecodeInputs in = base();
  in.context_lens.as<int32_t>()[0] = -1;
  expect_refused(write_case(in), {"--context-lens", "-1"});
}

TEST_F(CliBadInputTest, HeadSizeNotAMultipleOfXForFp8) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::f16;
  c.head_size = 40;  // fine for f16 (x = 8), not for fp8 (x = 16)
  c.lens = {5, 40};
  DecodeInputs in = random_inputs(c, 12);
  // Byte caches, as an fp8 cache is stored; no [.., D/x, B, x] layout exists for D = 40.
  in.key_cache = HostTensor(DType::u8, in.key_cache.shape());
  in.value_cache = HostTensor(DType::u8, in.value_cache.shape());
  auto args = write_case(in);
  args.insert(args.end(), {"--kv-dtype", "fp8_e4m3"});
  expect_refused(args, {"head_size", "40", "16"});
}

TEST_F(CliBadInputTest, MissingFile) {
  auto args = write_case(base());
  fs::remove(path("k.npy"));
  expect_refused(args, {"--key-cache", "k.npy", "cannot open"});
}

TEST_F(CliBadInputTest, NotAnNpyFile) {
  auto args = write_case(base());
  std::ofstream(path("q.npy"), std::ios::binary | std::ios::trunc) << "this is not an array";
  expect_refused(args, {"--query", "q.npy", "bad magic"});
}

TEST_F(CliBadInputTest, TruncatedNpyFile) {
  auto args = write_case(base());
  fs::resize_file(path("v.npy"), fs::file_size(path("v.npy")) - 4);
  expect_refused(args, {"--value-cache", "truncated"});
}

TEST_F(CliBadInputTest, Bf16BitsWithoutDtypeFlag) {
  CaseSpec c;
  c.dtype = c.cache_dtype = DType::bf16;
  c.lens = {5, 40};
  expect_refused(write_case(random_inputs(c, 13)), {"--query", "--dtype bf16"});
}

TEST_F(CliBadInputTest, IndexFileWithAFloatDtype) {
  DecodeInputs in = base();
  in.context_lens = HostTensor(DType::f32, Shape{2});
  expect_refused(write_case(in), {"--context-lens", "f32"});
}

TEST_F(CliBadInputTest, AlibiSlopesOfTheWrongLength) {
  DecodeInputs in = base();
  in.alibi_slopes = HostTensor(DType::f32, Shape{3});
  expect_refused(write_case(in), {"--alibi-slopes", "[3]"});
}

TEST_F(CliBadInputTest, BadOptionValues) {
  const auto args = write_case(base());
  auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_refused(with({"--kv-dtype", "fp4"}), {"--kv-dtype", "fp4"});
  expect_refused(with({"--split", "sideways"}), {"--split", "sideways"});
  expect_refused(with({"--kernel", "tensor"}), {"--kernel: 'tensor' is not auto, scalar, matrix or matrix-khr"});
  // The matrix kernel takes 16-bit queries only: this f32 case is refused on every device.
  expect_refused(with({"--kernel", "matrix"}), {"--kernel: kernel: matrix: "});
  expect_refused(with({"--softcap", "-1"}), {"--softcap"});
  expect_refused(with({"--k-scale", "0"}), {"--k-scale"});
  expect_refused(with({"--scale", "nan"}), {"--scale"});
  expect_refused(with({"--sliding-window", "many"}), {"--sliding-window"});
  expect_refused(with({"--frobnicate"}), {"frobnicate"});
}

TEST_F(CliBadInputTest, MissingRequiredOption) {
  auto args = write_case(base());
  args.resize(args.size() - 2);  // drops --out O.npy
  expect_refused(args, {"--out"});
}

TEST_F(CliBadInputTest, OutputDirectoryMissing) {
  auto args = write_case(base());
  args.back() = (path("no_such_dir") / "out.npy").string();
  expect_refused(args, {"--out", "no_such_dir"});
  EXPECT_FALSE(fs::exists(path("no_such_dir")));
}

TEST_F(CliBadInputTest, FailedCallKeepsAnEarlierOutput) {
  DecodeInputs in = base();
  const auto args = write_case(in);
  ASSERT_EQ(run(args).exit_code, 0);
  const std::string before = slurp(path("out.npy"));
  in.context_lens.as<int32_t>()[0] = 100000;
  write_npy(path("cl.npy"), in.context_lens);
  const CliResult r = run(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(slurp(path("out.npy")), before) << "a refused call changed the earlier output";
}

// ---- info and demo ----

TEST_F(CliTest, VersionIsPrintedWithExitStatusZero) {
  const CliResult r = run({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "vkpaged " VKPAGED_PROJECT_VERSION "\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, InfoListsDevicesAndTheCpuReference) {
  const CliResult r = run({"info"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("vkpaged " VKPAGED_PROJECT_VERSION "\n", 0), 0u) << "the version first: " << r.out;
  EXPECT_NE(r.out.find("(default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("maxStorageBufferRange"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("maxMemoryAllocationSize"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("VKPAGED_DEVICE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu: the CPU reference (--device cpu)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("free device-local memory"), std::string::npos) << r.out;
}

// ---- simulate ----

// A small workload that runs prompts in chunks under a token budget, forks (parallel sampling),
// copies on write and swaps out and back in, with every check on: exit 0, the new counts
// reported and above zero, every check passed.
TEST_F(CliTest, SimulateForksSwapsAndPassesItsChecks) {
  const CliResult r =
      run({"simulate", "--requests", "8", "--max-prompt", "64", "--max-output", "32", "--arrival-rate", "4",
           "--blocks", "14", "--host-blocks", "32", "--parallel-share", "0.5", "--max-samples", "3", "--layers", "1",
           "--check-every", "3", "--seed", "4", "--max-batch", "64", "--token-budget", "64", "--chunk", "24"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto count_after = [&](const std::string& label) -> long {
    const size_t at = r.out.find(label);
    if (at == std::string::npos) return -1;
    return std::strtol(r.out.c_str() + at + label.size(), nullptr, 10);
  };
  EXPECT_GT(count_after("parallel sampling: "), 0) << r.out;
  EXPECT_GT(count_after("copy-on-write block copies: "), 0) << r.out;
  EXPECT_GT(count_after("swap-outs: "), 0) << r.out;
  EXPECT_GT(count_after("swap-ins: "), 0) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("requests finished: 8 of 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sequences passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("copies passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a budget of 64 new tokens, decode requests first, then prefill chunks of up to 24 tokens"),
            std::string::npos)
      << r.out;
  EXPECT_GT(count_after("prompt tokens in "), 8) << r.out;  // prefill chunks: more than one a request
}

TEST_F(CliTest, SimulateRefusesBadOptionsInOneLine) {
  const CliResult r = run({"simulate", "--preemption", "drop"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--preemption: 'drop'"), std::string::npos) << r.err;
}

// Prompts of 0, 20 and 40 tokens in chunks of 16 (1, 2 and 3 steps, mixed with the decode
// requests of the sequences whose prompts are in), then 6 decode tokens each: 9 steps, checked
// at steps 3, 6 and 9.
TEST_F(CliTest, DemoRunsPromptsInChunksThenDecodesAndPassesItsChecks) {
  const CliResult r = run({"demo", "--batch", "3", "--min-len", "0", "--max-len", "40", "--steps", "6", "--heads", "4",
                           "--kv-heads", "2", "--head-size", "64", "--block-size", "8", "--chunk", "16",
                           "--check-every", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("checks: 3 of 3 passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefill: 60 prompt tokens in 3 steps (3 beside 4 decode tokens)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode: 14 tokens in decode-only steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rotary neox"), std::string::npos) << r.out;
  // The steps ran on the two buckets' plans; the first step's time, three ways.
  EXPECT_NE(r.out.find("plan of the first step: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plan of the first decode-only step: decode kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first step, building its pipelines as it needs them: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first step after Context::prepare: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first step after loading this run's pipeline cache ("), std::string::npos) << r.out;
  // Not a terminal: one line per check, no carriage returns.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

// The other layouts (decode steps then run on the attention kernel): nhd with GPT-J rotary and
// an fp8 cache, hnd without rotary and bf16.
TEST_F(CliTest, DemoOnTheOtherLayouts) {
  const std::vector<std::vector<std::string>> cases = {
      {"--kv-layout", "nhd", "--rotary", "gptj", "--kv-dtype", "fp8_e5m2"},
      {"--kv-layout", "hnd", "--rotary", "none", "--dtype", "bf16"},
  };
  for (const auto& options : cases) {
    std::vector<std::string> args = {"demo", "--batch", "2", "--min-len", "3", "--max-len", "21", "--steps", "3",
                                     "--heads", "4", "--kv-heads", "1", "--head-size", "32", "--block-size", "4",
                                     "--chunk", "8", "--check-every", "2"};
    args.insert(args.end(), options.begin(), options.end());
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << options[1] << r.out << r.err;
    EXPECT_NE(r.out.find("checks: 3 of 3 passed"), std::string::npos) << options[1] << r.out;
    EXPECT_NE(r.out.find(options[1] + " layout"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(options[3] == "none" ? "no rotary" : "rotary gptj"), std::string::npos) << r.out;
  }
}

TEST_F(CliTest, DemoRefusesBadOptionsInOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--dtype", "f64"}, "--dtype"},
      {{"--kv-layout", "nchw"}, "--kv-layout: 'nchw' is not vllm, nhd or hnd"},
      {{"--rotary", "alibi"}, "--rotary: 'alibi' is not neox, gptj or none"},
      {{"--chunk", "0"}, "--chunk: must be at least 1"},
  };
  for (const auto& [options, message] : cases) {
    std::vector<std::string> args = {"demo"};
    args.insert(args.end(), options.begin(), options.end());
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// ---- bench ----

// The numbers that follow each `key` in `text` (a JSON number, or each number of a JSON array).
std::vector<std::vector<double>> numbers_after(const std::string& text, const std::string& key) {
  std::vector<std::vector<double>> all;
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    std::istringstream in(text.substr(at + key.size()));
    std::vector<double> values;
    char c = 0;
    if (in.peek() == '[') {
      in >> c;
      double x = 0;
      while (in >> x) {
        values.push_back(x);
        if (!(in >> c) || c == ']') break;
      }
    } else {
      double x = 0;
      if (in >> x) values.push_back(x);
    }
    all.push_back(values);
  }
  return all;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(CliTest, BenchRefusesABadKernelBeforeOpeningADevice) {
  const CliResult r = run({"bench", "--suite", "quick", "--kernel", "tensor"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("vkpaged: --kernel: \"tensor\" is not auto, scalar, matrix or matrix-khr"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

TEST_F(CliTest, BenchRefusesABadKvLayoutBeforeOpeningADevice) {
  const CliResult r = run({"bench", "--suite", "quick", "--kv-layout", "nchw"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("vkpaged: --kv-layout: \"nchw\" is not vllm, nhd or hnd"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

TEST_F(CliTest, BenchRefusesATimelineDirectoryItCannotCreate) {
  std::ofstream(path("file")) << "not a directory";
  const std::string dir = path("file").string() + "/timeline";
  const CliResult r = run({"bench", "--suite", "quick", "--timeline", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("vkpaged: --timeline: cannot create " + dir), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

TEST_F(CliTest, BenchFlushesTheCachesBeforeEachRepetitionWhenAsked) {
  const CliResult r = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--flush-caches",
                           "--json", path("bench.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  EXPECT_NE(r.out.find("caches flushed before each repetition: a "), std::string::npos) << r.out;
  for (const char* name : {"q-long", "q-batch", "q-mha", "q-ragged"}) EXPECT_NE(r.out.find(name), std::string::npos) << name;
  const std::string json = slurp(path("bench.json"));
  EXPECT_EQ(json.find("\"cache_flush_bytes\": 0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"cache_flush_bytes\": "), std::string::npos) << json;
  EXPECT_NE(json.find("\"warm_start\": false,"), std::string::npos) << json;
  EXPECT_NE(json.find(kArenaByDefault ? "\"arena\": true," : "\"arena\": false,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rounds\": 1,"), std::string::npos) << json;
  EXPECT_EQ(count_of(r.out, "read bandwidth after the suite: "), 1u) << r.out;
}

TEST_F(CliTest, BenchPrefillTimesEveryShapeAndTheMixedStepInOneCallAndInParts) {
  const CliResult r = run({"bench", "--suite", "prefill-quick", "--repetitions", "10", "--warmup", "1", "--json",
                           path("prefill.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  for (const char* name : {"p256", "chunk2x64+192", "spec8x4@512", "p128-d128", "mixed (one call)", "mixed: decode part",
                           "mixed: chunk part"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_EQ(r.out.find("skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mixed step: one call "), std::string::npos) << r.out;
  // The decode part alone runs on the decode kernels (automatic), the rest on an attention kernel.
  EXPECT_NE(r.out.find("decode kernels: "), std::string::npos) << r.out;
  const std::string json = slurp(path("prefill.json"));
  EXPECT_NE(json.find("\"suite\": \"prefill-quick\""), std::string::npos) << json;
  const auto tflops = numbers_after(json, "\"tflops\": ");
  ASSERT_EQ(tflops.size(), 7u) << json;  // four shapes and the mixed step's three calls
  for (const auto& t : tflops) EXPECT_TRUE(t.size() == 1 && t[0] > 0) << json;
  const auto ratio = numbers_after(json, "\"one_call_over_parts\": ");
  ASSERT_EQ(ratio.size(), 1u) << json;
  EXPECT_TRUE(ratio[0].size() == 1 && ratio[0][0] > 0) << json;
}

TEST_F(CliTest, BenchPrefillRunsTheForcedKernelOrSaysWhyNot) {
  const CliResult bad = run({"bench", "--suite", "prefill-quick", "--kernel", "tensor"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("vkpaged: --kernel: \"tensor\" is not auto, scalar or matrix"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "") << "the bench started before refusing";
  // The matrix kernel runs every case where the device has it, and every case says why not
  // where it has not (lavapipe).
  const CliResult r = run({"bench", "--suite", "prefill-quick", "--kernel", "matrix", "--repetitions", "10", "--warmup", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"p256 ", "chunk2x64+192 ", "spec8x4@512 ", "p128-d128 ", "mixed (one call) ",
                           "mixed: decode part ", "mixed: chunk part "}) {
    const size_t at = r.out.find(name);
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_TRUE(line.find("skipped: kernel: matrix: ") != std::string::npos || line.find("matrix kernel (") != std::string::npos)
        << line;
  }
}

// The MLA suite (mla-quick: lavapipe-sized shapes of it): every case timed, beside its two
// limits measured in the same run (the read bandwidth; the cooperative-matrix ceiling, or a line
// saying the device has none), its kernel named, and its output checked against the CPU
// reference.
TEST_F(CliTest, BenchMlaTimesEveryCaseBesideItsLimitsAndChecksItsOutput) {
  const CliResult r = run({"bench", "--suite", "mla-quick", "--repetitions", "10", "--warmup", "1", "--flush-caches",
                           "--json", path("mla.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  EXPECT_NE(r.out.find("read bandwidth (streaming 16-byte loads, "), std::string::npos) << r.out;
  const bool ceiling = r.out.find("matrix ceiling (cooperative matrices, median of 10): ") != std::string::npos;
  EXPECT_NE(ceiling, r.out.find("matrix ceiling: no cooperative matrices (") != std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("skipped"), std::string::npos) << r.out;
  for (const char* name : {"q-r1-512-h16-bf16 ", "q-r4-256-h16-fp8_e4m3 ", "q-r2-256-h128-bf16 ", "q-r3-200-h128-fp8_e4m3 "}) {
    const size_t at = r.out.find(name);
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("  ok     "), std::string::npos) << line;
    // The kernel that ran (lavapipe 22.3: the portable one) and the plan's description.
    EXPECT_TRUE(line.find(" scalar  ") != std::string::npos || line.find(" matrix  ") != std::string::npos) << line;
    EXPECT_NE(line.find("(one pool), Dk 576 Dv 512"), std::string::npos) << line;
  }

  const nlohmann::json j = nlohmann::json::parse(slurp(path("mla.json")));
  EXPECT_EQ(j["suite"], "mla-quick");
  EXPECT_EQ(j["arena"], kArenaByDefault);
  EXPECT_GT(j["read_bandwidth_bytes_per_second"].get<double>(), 0);
  EXPECT_GT(j["cache_flush_bytes"].get<double>(), 0);
  const auto& m = j["matrix_ceiling"];
  EXPECT_EQ(m["unavailable"].get<std::string>().empty(), ceiling);
  EXPECT_EQ(m["flops_per_second"].get<double>() > 0, ceiling);
  ASSERT_EQ(j["cases"].size(), 4u);
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(c["skipped"], "");
    EXPECT_EQ(c["key_width"], 576);
    EXPECT_EQ(c["value_width"], 512);
    EXPECT_EQ(c["cache_bytes"].get<double>(),
              double(c["requests"].get<int>()) * c["context"].get<int>() * 576 * (c["cache_dtype"] == "bf16" ? 2 : 1));
    EXPECT_DOUBLE_EQ(c["flops"].get<double>(),
                     2.0 * c["heads"].get<int>() * (576 + 512) * c["context"].get<int>() * c["requests"].get<int>());
    EXPECT_GT(c["median_us"].get<double>(), 0);
    EXPECT_LE(c["min_us"].get<double>(), c["median_us"].get<double>());
    EXPECT_GT(c["cache_bytes_per_second"].get<double>(), 0);
    EXPECT_GT(c["flops_per_second"].get<double>(), 0);
    EXPECT_NEAR(c["share_of_memory_limit"].get<double>(),
                c["cache_bytes_per_second"].get<double>() / j["read_bandwidth_bytes_per_second"].get<double>(), 1e-9);
    EXPECT_EQ(c["share_of_compute_limit"].get<double>() > 0, ceiling);
    EXPECT_TRUE(c["kernel"] == "scalar" || c["kernel"] == "matrix") << c["kernel"];
    // The output was compared with the CPU reference: the first and last request, four heads.
    const auto& check = c["check"];
    EXPECT_EQ(check["against"], "the CPU reference (reference::mla_attention)");
    EXPECT_EQ(check["requests"].size(), c["requests"] == 1 ? 1u : 2u);
    EXPECT_EQ(check["heads"].size(), 4u);
    EXPECT_GT(check["max_abs_reference"].get<double>(), 0) << "an output of zeros checks nothing";
    EXPECT_TRUE(check["passed"].get<bool>());
  }
}

// Target 14's suite on lavapipe: many new tokens per request, causal after a cached prefix; each
// case's first and last new token of its first and last request checked against the reference.
TEST_F(CliTest, BenchMlaPrefillTimesChunksAndChecksTheirFirstAndLastTokens) {
  const CliResult r = run({"bench", "--suite", "mla-prefill-quick", "--repetitions", "10", "--warmup", "1", "--json",
                           path("mla-prefill.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  EXPECT_NE(r.out.find("MLA prefill and chunks: "), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(path("mla-prefill.json")));
  EXPECT_EQ(j["suite"], "mla-prefill-quick");
  ASSERT_EQ(j["cases"].size(), 3u);
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(c["skipped"], "");
    const int requests = c["requests"], q = c["new_tokens"], L = c["context"], heads = c["heads"];
    EXPECT_GT(q, 1);
    double seen = 0;
    for (int t = 0; t < q; ++t) seen += L - q + t + 1;
    EXPECT_DOUBLE_EQ(c["flops"].get<double>(), 2.0 * heads * (576 + 512) * seen * requests);
    EXPECT_GT(c["median_us"].get<double>(), 0);
    const auto& check = c["check"];
    EXPECT_EQ(check["tokens"], (std::vector<int>{0, q - 1}));
    EXPECT_EQ(check["requests"].size(), requests == 1 ? 1u : 2u);
    EXPECT_GT(check["max_abs_reference"].get<double>(), 0) << "an output of zeros checks nothing";
    EXPECT_TRUE(check["passed"].get<bool>());
  }
}

// --arena on the MLA suites, as on the decode suites: one allocation for the run, every case's
// pool, query, output, tables and scratch views into it, each case still checked against the
// reference; the arena holds at least the largest case's pool, query and output. --no-arena says
// so in the same places.
TEST_F(CliTest, BenchMlaSuitesRunEveryCaseInOneArenaWhenAsked) {
  for (const char* suite : {"mla-quick", "mla-prefill-quick"}) {
    SCOPED_TRACE(suite);
    const std::string json_path = path(std::string(suite) + ".json").string();
    const CliResult r =
        run({"bench", "--suite", suite, "--repetitions", "10", "--warmup", "1", "--arena", "--json", json_path});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
    EXPECT_NE(r.out.find("buffers: one arena of "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" (--arena)\n"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    EXPECT_EQ(j["arena"], true);
    ASSERT_EQ(j["cases"].size(), std::string(suite) == "mla-quick" ? 4u : 3u);
    double largest = 0;
    for (const auto& c : j["cases"]) {
      const std::string name = c["name"];
      SCOPED_TRACE(name);
      EXPECT_EQ(c["skipped"], "");
      EXPECT_TRUE(c["check"]["passed"].get<bool>());
      EXPECT_GT(c["check"]["max_abs_reference"].get<double>(), 0) << "an output of zeros checks nothing";
      const size_t at = r.out.find(name + " ");
      ASSERT_NE(at, std::string::npos) << r.out;
      EXPECT_NE(r.out.substr(at, r.out.find('\n', at) - at).find("  ok     "), std::string::npos) << r.out;
      const double requests = c["requests"], context = c["context"], heads = c["heads"], q = c["new_tokens"];
      const double pool = requests * std::ceil(context / 64) * 64 * 576 * (c["cache_dtype"] == "bf16" ? 2 : 1);
      largest = std::max(largest, pool + requests * q * heads * (576 + 512) * 2);
    }
    EXPECT_GE(j["arena_bytes"].get<double>(), largest);
  }
  const CliResult r = run({"bench", "--suite", "mla-prefill-quick", "--case", "q-p48", "--repetitions", "10", "--warmup",
                           "1", "--no-arena", "--json", path("per-case.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("buffers: each case allocates its own and frees them when it ends (--no-arena)\n"),
            std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(path("per-case.json")));
  EXPECT_EQ(j["arena"], false);
  EXPECT_EQ(j["arena_bytes"], 0);
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_TRUE(j["cases"][0]["check"]["passed"].get<bool>());
}

TEST_F(CliTest, BenchMlaRefusesDecodeOptionsBeforeOpeningADevice) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--kernel", "tensor"}, "vkpaged: --kernel: \"tensor\""},
      {{"--cache-dtype", "f16"}, "vkpaged: --cache-dtype: the MLA suites run bf16 and fp8_e4m3 caches"},
      {{"--kv-layout", "hnd"}, "vkpaged: --kv-layout: an MLA pool has one layout"},
      {{"--split", "halves"}, "vkpaged: --split: \"halves\" is not auto, single or split"},
      {{"--warm-start"}, "vkpaged: --warm-start needs --flush-caches"},
  };
  for (const auto& [options, message] : cases) {
    std::vector<std::string> args{"bench", "--suite", "mla-quick"};
    args.insert(args.end(), options.begin(), options.end());
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "the bench started before refusing";
  }
}

TEST_F(CliTest, BenchRunsOnlyTheCasesNamedInTheirSuitesOrder) {
  const CliResult r = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--case", "ragged",
                           "--case", "q-long", "--json", path("cases.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  const nlohmann::json j = nlohmann::json::parse(slurp(path("cases.json")));
  std::vector<std::string> names;
  for (const auto& c : j["cases"]) names.push_back(c["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"q-long", "q-ragged"})) << r.out;
  EXPECT_EQ(r.out.find("q-batch"), std::string::npos) << r.out;
}

TEST_F(CliTest, BenchPrefillRunsTheMixedStepOnlyWhenItsNameIsAsked) {
  const CliResult shapes = run({"bench", "--suite", "prefill-quick", "--repetitions", "20", "--warmup", "1", "--case",
                                "p256", "--json", path("shapes.json").string()});
  ASSERT_EQ(shapes.exit_code, 0) << shapes.err;
  const nlohmann::json s = nlohmann::json::parse(slurp(path("shapes.json")));
  ASSERT_EQ(s["cases"].size(), 1u) << shapes.out;
  EXPECT_EQ(s["cases"][0]["name"], "p256");
  EXPECT_FALSE(s.contains("mixed")) << shapes.out;
  EXPECT_EQ(shapes.out.find("mixed step"), std::string::npos) << shapes.out;

  const CliResult mixed = run({"bench", "--suite", "prefill-quick", "--repetitions", "20", "--warmup", "1", "--case",
                               "mixed", "--json", path("mixed.json").string()});
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  const nlohmann::json m = nlohmann::json::parse(slurp(path("mixed.json")));
  EXPECT_TRUE(m["cases"].empty()) << mixed.out;
  ASSERT_TRUE(m.contains("mixed")) << mixed.out;
  EXPECT_GT(m["mixed"]["one_call"]["median_us"].get<double>(), 0);
  EXPECT_GT(m["mixed"]["chunk_part"]["median_us"].get<double>(), 0);
}

TEST_F(CliTest, BenchRefusesACaseNamedInNoCaseBeforeOpeningADevice) {
  for (const char* suite : {"quick", "all", "prefill-quick", "mla-quick"}) {
    const CliResult r = run({"bench", "--suite", suite, "--case", "q-nothing", "--case", "zz"});
    EXPECT_EQ(r.exit_code, 1) << suite;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(std::string("vkpaged: --case: no case of suite \"") + suite + "\" has \"q-nothing\" or \"zz\" in its name"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << "the bench started before refusing";
  }
  const CliResult r = run({"bench", "--suite", "cache-write-quick", "--case", "f16"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("vkpaged: --case: the cache-write suites time every dtype and layout together"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

TEST_F(CliTest, BenchStartsWarmAfterTheSameDecodeAndTheFlushWhenAsked) {
  const CliResult r = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--flush-caches",
                           "--warm-start", "--json", path("bench.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  EXPECT_NE(r.out.find("warm start: each repetition runs after the same decode and the flush"), std::string::npos)
      << r.out;
  for (const char* name : {"q-long", "q-batch", "q-mha", "q-ragged"}) EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_NE(slurp(path("bench.json")).find("\"warm_start\": true,"), std::string::npos);
}

TEST_F(CliTest, BenchWarmsTheClocksOfEveryCaseWhenAskedAndSaysSoInTheJson) {
  const std::vector<std::pair<std::string, std::string>> suites = {
      {"quick", "q-long"}, {"mla-quick", "q-r1-"}, {"prefill-quick", "p256"}};
  for (const auto& [suite, one_case] : suites) {
    const std::string json = path(suite + ".json").string();
    const CliResult r = run({"bench", "--suite", suite, "--repetitions", "20", "--warmup", "1", "--clock-warmup-ms",
                             "2.5", "--case", one_case, "--json", json});
    ASSERT_EQ(r.exit_code, 0) << suite << r.err;
    EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
    EXPECT_NE(r.out.find("clock warm-up: the device kept busy (streaming reads) for 2.5 ms before each case's warm-up runs"),
              std::string::npos)
        << r.out;
    const nlohmann::json j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["clock_warmup_ms"].get<double>(), 2.5) << suite;
    // Each case's wall clock, to line it up with clock samples.
    ASSERT_EQ(j["cases"].size(), 1u);
    const nlohmann::json& wall = j["cases"][0]["wall_clock_s"];
    EXPECT_GT(wall["warmup"].get<double>(), 1.7e9);  // seconds since 1970: after 2023
    EXPECT_GE(wall["timed"].get<double>() - wall["warmup"].get<double>(), 0.0025);
    EXPECT_GE(wall["end"].get<double>(), wall["timed"].get<double>());
  }
  for (const char* suite : {"quick", "mla-quick", "prefill-quick", "cache-write-quick"}) {
    const CliResult refused = run({"bench", "--suite", suite, "--clock-warmup-ms", "-1"});
    EXPECT_EQ(refused.exit_code, 1) << suite;
    EXPECT_NE(refused.err.find("vkpaged: --clock-warmup-ms: \"-1\" is not auto or a number of milliseconds, 0 or more"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(refused.out, "") << "the bench started before refusing";
  }
  // auto: a second on a GPU, none on a CPU device (lavapipe).
  const bool cpu = test::shared_context().device_info().type == "cpu";
  const CliResult automatic = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--case", "q-long",
                                   "--json", path("auto.json").string()});
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("auto.json")))["clock_warmup_ms"].get<double>(), cpu ? 0.0 : 1000.0);
  EXPECT_EQ(automatic.out.find("clock warm-up:") == std::string::npos, cpu) << automatic.out;
}

TEST_F(CliTest, BenchRefusesAWarmStartWithoutTheFlush) {
  const CliResult r = run({"bench", "--suite", "quick", "--warm-start"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("vkpaged: --warm-start needs --flush-caches"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

TEST_F(CliTest, BenchRunsEveryCaseWithTheCacheDtypeAsked) {
  const CliResult r = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--cache-dtype", "fp8_e5m2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  for (const char* name : {"q-long-fp8_e5m2", "q-batch-fp8_e5m2", "q-mha-fp8_e5m2", "q-ragged-fp8_e5m2"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
}

TEST_F(CliTest, BenchRefusesACacheDtypeItCannotRunBeforeOpeningADevice) {
  for (const char* dtype : {"fp4", "i32"}) {
    const CliResult r = run({"bench", "--suite", "quick", "--cache-dtype", dtype});
    EXPECT_EQ(r.exit_code, 1) << dtype;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(std::string("vkpaged: --cache-dtype: \"") + dtype + "\" is not a cache dtype"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << "the bench started before refusing";
  }
}

TEST_F(CliTest, BenchRepeatsTheSuiteInOneArenaAndFlagsWhatMoved) {
  const CliResult r = run({"bench", "--suite", "quick", "--repetitions", "20", "--warmup", "1", "--repeat", "2",
                           "--arena", "--json", path("bench.json").string()});
  ASSERT_EQ(r.exit_code, 0) << "a disturbed run is reported, not failed\n" << r.err;
  EXPECT_EQ(r.err, "") << "nothing may reach stderr on success (validation messages included)";
  EXPECT_NE(r.out.find("buffers: one arena of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round 2 of 2"), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, "read bandwidth after the suite: "), 2u) << r.out;
  const std::string json = slurp(path("bench.json"));
  EXPECT_NE(json.find("\"arena\": true,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rounds\": 2,"), std::string::npos) << json;
  const auto arena_bytes = numbers_after(json, "\"arena_bytes\": ");
  ASSERT_EQ(arena_bytes.size(), 1u);
  EXPECT_GT(arena_bytes[0].at(0), 0.0);

  const size_t cases_at = json.find("\"cases\": [");
  ASSERT_NE(cases_at, std::string::npos) << json;
  const std::string cases = json.substr(cases_at);
  // Four cases in each of two rounds, each timed, each pool pair read.
  const auto case_rounds = numbers_after(cases, "\"round\": ");
  ASSERT_EQ(case_rounds.size(), 8u) << cases;
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(case_rounds[i].at(0), i < 4 ? 1.0 : 2.0) << i;
  for (const auto& m : numbers_after(cases, "\"median_us\": ")) EXPECT_GT(m.at(0), 0.0);
  for (const auto& m : numbers_after(cases, "\"pool_read_bytes_per_second\": ")) EXPECT_GT(m.at(0), 0.0);

  // The flags follow from the figures the JSON gives, and each flag printed one line.
  const std::string head = json.substr(0, cases_at);
  const auto starts = numbers_after(head, "\"read_start_bytes_per_second\": ");
  const auto afters = numbers_after(head, "\"read_after_bytes_per_second\": ");
  ASSERT_EQ(starts.size(), 2u) << head;
  ASSERT_EQ(afters.size(), 2u) << head;
  const size_t suite_part = head.find("\"suite_runs\""), rounds_part = head.find("\"case_rounds\"");
  ASSERT_LT(suite_part, rounds_part);
  const std::string suite_runs = head.substr(suite_part, rounds_part - suite_part);
  const std::string rounds = head.substr(rounds_part);
  size_t flagged = 0;
  std::vector<bool> suite_flags;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(afters[i].at(0), 0.0);
    suite_flags.push_back(bandwidth_disturbed(starts[i].at(0), afters[i].at(0)));
    flagged += suite_flags.back();
  }
  EXPECT_EQ(count_of(suite_runs, "\"disturbed\": true"), flagged) << suite_runs;
  const auto medians = numbers_after(rounds, "\"median_us\": ");
  ASSERT_EQ(medians.size(), 4u) << rounds;
  size_t differing = 0;
  for (const auto& m : medians) {
    ASSERT_EQ(m.size(), 2u) << rounds;
    differing += round_spread(m) > kStableTolerance;
  }
  EXPECT_EQ(count_of(rounds, "\"disturbed\": true"), differing) << rounds;
  EXPECT_EQ(count_of(r.out, "\ndisturbed: suite quick, round "), flagged) << r.out;
  EXPECT_EQ(count_of(r.out, "\ndisturbed: case "), differing) << r.out;
  const bool any = flagged + differing > 0;
  EXPECT_NE(json.find(any ? "\"disturbed\": true,\n  \"suite_runs\"" : "\"disturbed\": false,\n  \"suite_runs\""),
            std::string::npos)
      << json;
  EXPECT_EQ(r.out.find("\nstable: ") != std::string::npos, !any) << r.out;
}

TEST_F(CliTest, BenchRefusesARepeatBelowOneBeforeOpeningADevice) {
  const CliResult r = run({"bench", "--suite", "quick", "--repeat", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("vkpaged: --repeat: 0 is not 1 or more rounds"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "the bench started before refusing";
}

// ---- in-process pieces ----

TEST(CliBench, CacheDtypeReplacesEveryCasesCacheAndFloatQuery) {
  const auto dtypes = bench_suite("dtypes");
  const auto unchanged = with_cache_dtype(dtypes, "");
  ASSERT_EQ(unchanged.size(), dtypes.size());
  for (size_t i = 0; i < dtypes.size(); ++i) EXPECT_EQ(unchanged[i].name, dtypes[i].name);

  const auto fp8 = with_cache_dtype(dtypes, "fp8_e4m3");
  ASSERT_EQ(fp8.size(), dtypes.size());
  for (size_t i = 0; i < fp8.size(); ++i) {
    EXPECT_EQ(fp8[i].cache_dtype, DType::fp8_e4m3) << fp8[i].name;
    EXPECT_EQ(fp8[i].query_dtype, DType::f16) << fp8[i].name;  // an fp8 cache takes an f16 query
    EXPECT_EQ(fp8[i].batch, dtypes[i].batch);
    EXPECT_EQ(fp8[i].context, dtypes[i].context);
  }
  EXPECT_EQ(fp8[0].name, "batch64-f32-fp8_e4m3");
  EXPECT_EQ(fp8[3].name, "batch64-fp8_e4m3") << "a case that already had the dtype keeps its name";

  for (const auto& c : with_cache_dtype(dtypes, "bf16")) {
    EXPECT_EQ(c.cache_dtype, DType::bf16) << c.name;
    EXPECT_EQ(c.query_dtype, DType::bf16) << c.name << ": a float cache holds the query's dtype";
  }
}

TEST(CliBench, DecodeOptionsFromTheCommandLine) {
  BenchOptions b;
  EXPECT_EQ(bench_decode_options(b).kernel, DecodeKernel::automatic);
  b.kernel = "scalar";
  EXPECT_EQ(bench_decode_options(b).kernel, DecodeKernel::scalar);
  b.kernel = "matrix";
  b.split = "split";
  b.partition_tokens = 512;
  const DecodeOptions o = bench_decode_options(b);
  EXPECT_EQ(o.kernel, DecodeKernel::matrix);
  EXPECT_EQ(o.split, SplitMode::split);
  EXPECT_EQ(o.partition_tokens, 512u);
  EXPECT_EQ(o.order, DecodeOrder::automatic);
  b.order = "longest-first";
  EXPECT_EQ(bench_decode_options(b).order, DecodeOrder::longest_first);
  EXPECT_EQ(bench_decode_options(b).merge, DecodeMerge::reduce_pass);
  b.merge = "in-dispatch";
  EXPECT_EQ(bench_decode_options(b).merge, DecodeMerge::in_dispatch);
  b.merge = "later";
  try {
    bench_decode_options(b);
    ADD_FAILURE() << "--merge later was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--merge: \"later\" is not reduce-pass or in-dispatch");
  }
  b.merge = "reduce-pass";
  b.order = "grid";
  EXPECT_EQ(bench_decode_options(b).order, DecodeOrder::grid);
  b.kernel = "Matrix";
  try {
    bench_decode_options(b);
    ADD_FAILURE() << "--kernel Matrix was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "--kernel: \"Matrix\" is not auto, scalar, matrix or matrix-khr");
  }
  b.kernel = "auto";
  b.order = "longest";
  try {
    bench_decode_options(b);
    ADD_FAILURE() << "--order longest was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "--order: \"longest\" is not auto, grid or longest-first");
  }
}

TEST(CliErrors, EveryExceptionBecomesOneLine) {
  std::ostringstream err;
  EXPECT_EQ(run_reporting_errors([]() -> int { throw Error(ErrorCode::invalid_argument, "two\nlines"); }, err), 1);
  EXPECT_EQ(err.str(), "vkpaged: two lines\n");
  err.str("");
  // 2 is the usage errors' status alone (a command line that cannot be parsed): a failure is 1.
  EXPECT_EQ(run_reporting_errors([]() -> int { throw Error(ErrorCode::internal, "bug"); }, err), 1);
  err.str("");
  EXPECT_EQ(run_reporting_errors([]() -> int { throw 42; }, err), 1);
  EXPECT_EQ(err.str(), "vkpaged: unknown error\n");
  err.str("");
  EXPECT_EQ(run_reporting_errors([] { return 0; }, err), 0);
  EXPECT_EQ(err.str(), "");
}

TEST(CliErrors, LibraryMessagesNameTheOption) {
  EXPECT_EQ(blame_option("block_tables[0][1]: block id 9 is outside [0, N = 8)"),
            "--block-tables: block_tables[0][1]: block id 9 is outside [0, N = 8)");
  EXPECT_EQ(blame_option("num_heads: 6 is not a multiple of num_kv_heads 4"),
            "--query: num_heads: 6 is not a multiple of num_kv_heads 4");
  EXPECT_EQ(blame_option("kernel: matrix: query_dtype f32 and cache_dtype f32: the matrix kernel takes f16 only"),
            "--kernel: kernel: matrix: query_dtype f32 and cache_dtype f32: the matrix kernel takes f16 only");
  EXPECT_EQ(blame_option("something else"), "something else");
}

}  // namespace
}  // namespace vkpaged::cli
