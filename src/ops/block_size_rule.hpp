// SPDX-License-Identifier: Apache-2.0
#pragma once
// The block sizes B the operators take (docs/contract.md): powers of two from 1 to 128. Decode
// refuses others, so BlockManager and KvCache refuse them too: no cache or block table is made
// that the decode would refuse. One definition, used by all three.
#include <cstdint>

namespace vkpaged::detail {

inline constexpr int64_t kMaxBlockSize = 128;
inline constexpr const char* kBlockSizeRule = "a power of two from 1 to 128";

inline constexpr bool is_supported_block_size(int64_t block_size) {
  return block_size >= 1 && block_size <= kMaxBlockSize && (block_size & (block_size - 1)) == 0;
}

}  // namespace vkpaged::detail
