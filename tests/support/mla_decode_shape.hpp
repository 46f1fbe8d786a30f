// SPDX-License-Identifier: Apache-2.0
#pragma once
// An MLA decode step's shape for the planners' tests: two requests of one token each, one kv
// head, nhd rows Dk wide, 64 blocks of 16 positions per table.
#include "vkpaged/mla.hpp"

namespace vkpaged::test {

inline MlaShape mla_decode_shape(uint32_t heads, uint32_t dk, uint32_t dv, DType query, DType cache) {
  MlaShape m;
  AttentionShape& s = m.attention;
  s.num_requests = 2;
  s.num_query_tokens = 2;
  s.num_heads = heads;
  s.num_kv_heads = 1;
  s.head_size = dk;
  s.block_size = 16;
  s.num_blocks = 64;
  s.max_blocks_per_seq = 64;
  s.kv_layout = KvLayout::nhd;
  s.query_dtype = query;
  s.cache_dtype = cache;
  m.value_head_size = dv;
  return m;
}

}  // namespace vkpaged::test
