// SPDX-License-Identifier: Apache-2.0
#pragma once
// Random decode-attention inputs in the contract's layouts, and the comparison the tests use.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "vkpaged/decode.hpp"

namespace vkpaged::test {

struct DecodeCase {
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_size = 64;
  uint32_t block_size = 16;
  std::vector<uint32_t> lens{1, 17};
  DType query_dtype = DType::f16;
  DType cache_dtype = DType::f16;  // the query's dtype for "auto"
  bool alibi = false;
  bool sinks = false;
  uint32_t extra_blocks = 3;  // unused blocks in the cache, so tables do not cover it exactly
  uint32_t extra_columns = 1; // block-table columns beyond the longest sequence
  float fp8_scale = 0.05f;    // k_scale and v_scale of fp8 caches (values stored / scale)
  std::string str() const;
};

// Inputs drawn from U(-1, 1), block tables shuffled over the whole cache, unused table entries
// filled with valid-but-wrong ids, and cache slots past each length filled with garbage
// (NaN bit patterns for float caches) that must never be read.
DecodeInputs make_decode_inputs(const DecodeCase& c, std::mt19937& rng);

// Element indices of token slot `offset` of `block`, kv head `kv_head`, dim `dim` in the
// contract's key cache [N][Hkv][D/x][B][x] and value cache [N][Hkv][D][B] for case `c`.
size_t key_cache_index(const DecodeCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset);
size_t value_cache_index(const DecodeCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset);

// The same inputs with the caches moved from the vllm layout into `layout` (every element,
// garbage slots included); the vllm layout's inputs as they are.
DecodeInputs with_layout(const DecodeInputs& vllm_inputs, KvLayout layout);

// The physical block that holds token `token` of sequence `seq` (its block-table entry in `in`).
int64_t block_of_token(const DecodeCase& c, const DecodeInputs& in, int64_t seq, int64_t token);

// A shape for planning only (nothing allocated): f16, blocks of 16 tokens, and a block table
// and pool just long enough for max_context_len.
DecodeShape plan_shape(uint32_t num_seqs, uint32_t num_heads, uint32_t num_kv_heads, uint32_t head_size,
                       uint32_t max_context_len);

// Per-call values that fit the case: fp8 scales for fp8 caches.
DecodeParams default_params(const DecodeCase& c);

// The 16 combinations of ALiBi, sinks, soft cap and a sliding window over ragged lengths (with
// a scale other than the default), each with its seed: what every decode kernel is checked on.
struct FeatureMix {
  DecodeCase c;
  DecodeOptions options;
  DecodeParams params;
  uint32_t seed = 0;
};
std::vector<FeatureMix> feature_mixes();

// An i32 tensor [n] of `values` (lengths, query starts).
inline HostTensor ints(const std::vector<int32_t>& values) {
  HostTensor t(DType::i32, Shape{int64_t(values.size())});
  std::copy(values.begin(), values.end(), t.as<int32_t>());
  return t;
}

// The contract's tolerance for a query/cache dtype pair.
double tolerance(DType query, DType cache);

// Largest |a - b| over two tensors of the same shape; NaN if either holds a NaN or Inf.
double max_abs_diff(const HostTensor& a, const HostTensor& b);

}  // namespace vkpaged::test
