// SPDX-License-Identifier: Apache-2.0
// The .npy format: magic "\x93NUMPY", version (major, minor), header length (2 bytes in 1.0,
// 4 bytes in 2.0 and 3.0), a Python dict literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...)}, then the raw elements.
#include "npy.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "atomic_file.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

static_assert(std::endian::native == std::endian::little, "the .npy code reads and writes host memory as little endian");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& problem) {
  throw Error(ErrorCode::invalid_argument, fmt::format("{}: {}", file.string(), problem));
}

[[noreturn]] void io_failure(const std::filesystem::path& file, const std::string& problem) {
  throw Error(ErrorCode::io_error, fmt::format("{}: {}", file.string(), problem));
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header's dict literal: exactly the subset NumPy writes (quoted keys, a quoted
// descr, True/False, a tuple of non-negative integers), in any key order.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::filesystem::path& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (take('}')) break;
      const std::string key = parse_string();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') bad("structured dtypes (a list as descr) are not supported");
        h.descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        seen_shape = true;
      } else {
        bad(fmt::format("unknown key '{}'", key));
      }
      skip_space();
      if (take(',')) continue;
      expect('}');
      break;
    }
    skip_space();
    if (pos_ != text_.size()) bad("text after the closing brace");
    if (!seen_descr) bad("no 'descr' key");
    if (!seen_order) bad("no 'fortran_order' key");
    if (!seen_shape) bad("no 'shape' key");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) { refuse(file_, fmt::format("bad .npy header: {}", what)); }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  bool take(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    skip_space();
    if (!take(c)) bad(fmt::format("expected '{}' at offset {}", c, pos_));
  }
  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad(fmt::format("expected a quoted string at offset {}", pos_));
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") { pos_ += 4; return true; }
    if (text_.substr(pos_, 5) == "False") { pos_ += 5; return false; }
    bad("fortran_order is neither True nor False");
  }
  int64_t parse_dim() {
    skip_space();
    if (peek() < '0' || peek() > '9') bad(fmt::format("expected a non-negative integer in the shape at offset {}", pos_));
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (v > (INT64_MAX - 9) / 10) bad("a shape dimension overflows 64 bits");
      v = v * 10 + (text_[pos_++] - '0');
    }
    take('L');  // Python 2 long literals
    return v;
  }
  std::vector<int64_t> parse_shape() {
    if (!take('(')) bad("shape is not a tuple");
    std::vector<int64_t> dims;
    skip_space();
    if (take(')')) return dims;
    while (true) {
      dims.push_back(parse_dim());
      skip_space();
      if (take(')')) return dims;
      if (!take(',')) bad("expected ',' or ')' in the shape");
      skip_space();
      if (take(')')) return dims;
    }
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  size_t pos_ = 0;
};

// descr without its byte-order character -> dtype.
std::optional<DType> dtype_of_code(std::string_view code, bool u2_is_bf16, const std::filesystem::path& file) {
  if (code == "f4") return DType::f32;
  if (code == "f2") return DType::f16;
  if (code == "u1") return DType::u8;
  if (code == "i4") return DType::i32;
  if (code == "u4") return DType::u32;
  if (code == "i8") return DType::i64;
  if (code == "u2") {
    if (!u2_is_bf16)
      refuse(file, "a <u2 array is read as bf16 bits only with --dtype bf16 (NumPy has no bf16 type)");
    return DType::bf16;
  }
  return std::nullopt;
}

DType dtype_of_descr(const std::string& descr, bool u2_is_bf16, const std::filesystem::path& file) {
  std::string_view code = descr;
  char order = '<';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code.remove_prefix(1);
  }
  const auto dtype = dtype_of_code(code, u2_is_bf16, file);
  if (!dtype)
    refuse(file, fmt::format("dtype '{}' is not supported (<f4, <f2, <u2 as bf16, |u1, <i4, <u4, <i8)", descr));
  if (order == '>' && dtype_size(*dtype) > 1)
    refuse(file, fmt::format("big-endian data ('{}') is not supported; save it little endian", descr));
  return *dtype;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

void read_exactly(std::FILE* f, void* dst, size_t bytes, const std::filesystem::path& file, const char* what) {
  if (bytes == 0) return;
  if (std::fread(dst, 1, bytes, f) != bytes) {
    if (std::ferror(f)) io_failure(file, fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
    refuse(file, fmt::format("truncated .npy file: the {} ends early", what));
  }
}

std::string shape_tuple(const Shape& shape) {
  if (shape.rank() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape.dims(), ", "));
}

}  // namespace

std::string npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::u8: return "|u1";
    case DType::i32: return "<i4";
    case DType::u32: return "<u4";
    case DType::i64: return "<i8";
  }
  throw Error(ErrorCode::internal, "npy_descr: unknown dtype");
}

HostTensor read_npy(const std::filesystem::path& path, const NpyReadOptions& options) {
  // A regular file only: a FIFO with no writer is refused, not waited on (atomic_file.hpp).
  const int fd = open_regular_file(path);
  File f(::fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    ::close(fd);
    io_failure(path, fmt::format("cannot open: {}", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) io_failure(path, fmt::format("cannot read its size: {}", std::strerror(errno)));
  const uint64_t file_bytes = uint64_t(st.st_size);

  unsigned char prefix[8];
  if (file_bytes < sizeof(prefix)) refuse(path, fmt::format("not an .npy file: only {} bytes", file_bytes));
  read_exactly(f.get(), prefix, sizeof(prefix), path, "magic");
  if (std::memcmp(prefix, kMagic, kMagicBytes) != 0) refuse(path, "not an .npy file: bad magic (expected \\x93NUMPY)");
  const unsigned major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0)
    refuse(path, fmt::format("unsupported .npy version {}.{} (1.0, 2.0 and 3.0 are read)", major, minor));

  unsigned char len_bytes[4] = {0, 0, 0, 0};
  const size_t len_size = major == 1 ? 2 : 4;
  read_exactly(f.get(), len_bytes, len_size, path, "header length");
  const uint64_t header_len = uint64_t(len_bytes[0]) | uint64_t(len_bytes[1]) << 8 | uint64_t(len_bytes[2]) << 16 |
                              uint64_t(len_bytes[3]) << 24;
  const uint64_t data_start = sizeof(prefix) + len_size + header_len;
  if (data_start > file_bytes)
    refuse(path, fmt::format("truncated .npy file: the header claims {} bytes, the file has {}", header_len, file_bytes));
  std::string header_text(header_len, '\0');
  read_exactly(f.get(), header_text.data(), header_len, path, "header");

  const NpyHeader header = HeaderParser(header_text, path).parse();
  if (header.fortran_order) refuse(path, "Fortran-order arrays are not supported; save a C-order array");
  const DType dtype = dtype_of_descr(header.descr, options.u2_is_bf16, path);
  if (header.shape.size() > size_t(kMaxRank))
    refuse(path, fmt::format("rank {} exceeds the maximum of {}", header.shape.size(), kMaxRank));

  uint64_t data_bytes = dtype_size(dtype);
  for (int64_t d : header.shape)
    if (__builtin_mul_overflow(data_bytes, uint64_t(d), &data_bytes))
      refuse(path, "the shape's byte count overflows 64 bits");
  const uint64_t available = file_bytes - data_start;
  if (available < data_bytes)
    refuse(path, fmt::format("truncated .npy file: shape {} needs {} data bytes, the file holds {}",
                             Shape(header.shape).str(), data_bytes, available));
  if (available > data_bytes)
    refuse(path, fmt::format("{} unexpected bytes after the array data", available - data_bytes));

  HostTensor tensor(dtype, Shape(header.shape));
  read_exactly(f.get(), tensor.data(), tensor.bytes(), path, "array data");
  return tensor;
}

void write_npy(const std::filesystem::path& path, const HostTensor& tensor) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(tensor.dtype()),
                                 shape_tuple(tensor.shape()));
  // Pad with spaces and a final newline so that the data starts on a 64-byte boundary.
  const size_t prefix_v1 = kMagicBytes + 2 + 2;
  const bool v2 = prefix_v1 + dict.size() + 1 > 65535;
  const size_t prefix = v2 ? kMagicBytes + 2 + 4 : prefix_v1;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::string head(kMagic, kMagicBytes);
  head.push_back(char(v2 ? 2 : 1));
  head.push_back(char(0));
  const uint32_t len = uint32_t(dict.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) head.push_back(char((len >> (8 * i)) & 0xff));
  head += dict;

  const std::span<const std::byte> chunks[] = {
      std::as_bytes(std::span(head)),
      {static_cast<const std::byte*>(tensor.data()), tensor.bytes()},
  };
  write_file_atomically(path, chunks);
}

}  // namespace vkpaged::cli
