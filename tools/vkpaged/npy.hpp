// SPDX-License-Identifier: Apache-2.0
#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0; C order, little endian) to and from
// vkpaged::HostTensor. Every refusal is a vkpaged::Error that names the file and the problem:
// io_error when the file cannot be opened, read or written, invalid_argument when its
// contents are not an array vkpaged can take.
#include <filesystem>
#include <string>

#include "vkpaged/tensor.hpp"

namespace vkpaged::cli {

struct NpyReadOptions {
  // NumPy has no bf16: bf16 arrays travel as <u2 raw bits, read as bf16 only when the caller
  // says so (--dtype bf16). Without it a <u2 file is refused.
  bool u2_is_bf16 = false;
};

// Reads a whole .npy file. Accepted descr: <f4 f32, <f2 f16, <u2 bf16 (see above), |u1 u8,
// <i4 i32, <u4 u32, <i8 i64.
HostTensor read_npy(const std::filesystem::path& path, const NpyReadOptions& options = {});

// Writes a tensor as a version 1.0 .npy (2.0 when the header needs it). bf16 is written as
// <u2, fp8 as |u1. Atomic: the bytes go to a temporary file beside `path`, which is renamed
// over it at the end, so no reader ever sees a partial file and a failed write leaves an
// earlier file at `path` untouched.
void write_npy(const std::filesystem::path& path, const HostTensor& tensor);

// The .npy descr string for a dtype ("<f4", ...).
std::string npy_descr(DType dtype);

}  // namespace vkpaged::cli
