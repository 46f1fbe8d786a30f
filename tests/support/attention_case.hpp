// SPDX-License-Identifier: Apache-2.0
#pragma once
// Random multi-query attention inputs in every cache layout, and the comparison the tests make.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

enum class TreeMask {
  none,
  random,  // each entry 0 or 1 at random: tokens that hide themselves, and see later ones
  tree,    // a draft tree: token j sees itself and its ancestors (each token's parent an earlier one);
           // requests of more than 16 new tokens (prefill chunks) get a chain, the causal mask
};

struct AttentionCase {
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_size = 32;
  uint32_t block_size = 16;
  std::vector<uint32_t> lens{5, 40};        // L_s, the new tokens included
  std::vector<uint32_t> new_tokens{5, 3};   // q_s
  DType query_dtype = DType::f16;
  DType cache_dtype = DType::f16;
  KvLayout layout = KvLayout::vllm;
  bool alibi = false;
  bool sinks = false;
  uint32_t sliding_window = 0;
  TreeMask tree_mask = TreeMask::none;
  uint32_t extra_blocks = 3;   // unused blocks in the cache, so tables do not cover it exactly
  uint32_t extra_columns = 1;  // block-table columns beyond the longest request
  float fp8_scale = 0.05f;     // k_scale and v_scale of fp8 caches (values stored / scale)
  std::string str() const;
};

// Inputs drawn from U(-1, 1), block tables shuffled over the whole cache, unused table entries
// filled with valid-but-wrong ids, and cache slots past each length filled with NaN bit
// patterns (float caches) that must never be read.
AttentionInputs make_attention_inputs(const AttentionCase& c, std::mt19937& rng);

// The decode inputs as a multi-query batch of one new token per request (query_starts 0, 1, ...,
// S), their layout and a sliding window of `sliding_window`.
AttentionInputs single_token_batch(const DecodeInputs& decode, uint32_t sliding_window);

// Params that fit the case: fp8 scales for fp8 caches.
AttentionParams default_params(const AttentionCase& c);

// Element index of (block, kv head, dim, in-block offset) in the case's key or value cache.
uint64_t key_index(const AttentionCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset);
uint64_t value_index(const AttentionCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset);
// The physical block that holds position `t` of request `s`.
int64_t block_of(const AttentionCase& c, const AttentionInputs& in, int64_t s, int64_t t);

// Output within `tol` of the reference, NaN exactly where the reference has NaN; with LSE,
// -inf and NaN where the reference has them and within 1e-3 + tol elsewhere.
void expect_attention_near(const AttentionResult& got, const AttentionResult& want, double tol, bool lse,
                           const std::string& label);

}  // namespace vkpaged::test
