// SPDX-License-Identifier: Apache-2.0
// The CLI's .npy reader (tools/vkpaged/npy.cpp) on arbitrary file contents. read_npy must
// either return a tensor or throw vkpaged::Error; a returned tensor must hold exactly the
// file's data bytes, and must survive write_npy + read_npy unchanged.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "fuzz_support.hpp"
#include "npy.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::fuzz {
namespace {

namespace fs = std::filesystem;

// One scratch folder per process, in memory where there is /dev/shm.
const fs::path& scratch() {
  static const fs::path dir = [] {
    std::error_code ec;
    fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("vkpaged_fuzz_npy_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write_file(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  FUZZ_CHECK(out.good(), "cannot write the scratch file " + path.string());
}

bool same(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.bytes() == b.bytes() &&
         (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkpaged;
  using namespace vkpaged::fuzz;
  const fs::path in = scratch() / "in.npy", out = scratch() / "out.npy";
  write_file(in, data, size);
  for (const bool bf16 : {false, true}) {
    HostTensor t;
    try {
      t = cli::read_npy(in, {.u2_is_bf16 = bf16});
    } catch (const Error&) {
      continue;
    }
    FUZZ_CHECK(t.bytes() == size_t(t.numel()) * dtype_size(t.dtype()), "tensor bytes disagree with its shape");
    FUZZ_CHECK(t.bytes() <= size, "a tensor of " + std::to_string(t.bytes()) + " bytes from a file of " +
                                      std::to_string(size));
    FUZZ_CHECK(t.bytes() == 0 || std::memcmp(t.data(), data + (size - t.bytes()), t.bytes()) == 0,
               "the tensor does not hold the file's trailing data bytes");
    cli::write_npy(out, t);
    const HostTensor back = cli::read_npy(out, {.u2_is_bf16 = bf16});  // what we wrote must read back
    FUZZ_CHECK(same(t, back), "write_npy + read_npy changed " + t.shape().str());
  }
  return 0;
}
