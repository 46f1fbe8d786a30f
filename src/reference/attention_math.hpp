// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one definition of the multi-query attention math in the CPU reference (docs/contract.md,
// "Multi-query attention", with the decode math of steps 1-9), in double precision, shared by
// batch_attention (every kv layout) and mla_attention (multi-head latent attention). The cache
// is read through KvReader, so that the math does not know how keys and values are stored: a
// key is key_width entries, a value value_width entries (MLA: the key's first Dv entries).
#include <cstdint>
#include <vector>

#include "ops/attention_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged::reference::math {

// Where the element (kv head g, dim d) of the position at in-block offset o of block `block` is
// stored: a cache tensor and the element's index in it. The math reads it as the contract does
// (fp8: decode(byte) * k_scale or v_scale).
struct CacheSlot {
  const HostTensor& tensor;
  uint64_t index = 0;
};
class KvReader {
 public:
  virtual ~KvReader() = default;
  virtual CacheSlot key(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const = 0;    // d < key_width
  virtual CacheSlot value(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const = 0;  // d < value_width
};

// A validated problem: the shape (its head_size is not read: key_width and value_width are),
// the request inputs and the page tables in their dense form.
struct AttentionProblem {
  const AttentionShape& shape;
  uint32_t key_width = 0;    // query and key entries per head
  uint32_t value_width = 0;  // value and output entries per head
  const HostTensor& query;   // [T, H, key_width]
  const HostTensor& tree_mask;
  const HostTensor& alibi_slopes;
  const HostTensor& sinks;
  const std::vector<int32_t>& query_starts;        // [S + 1]
  const vkpaged::detail::DensePageTables& tables;  // [S * M] and [S]
};

// Output [T, H, value_width] in the query's dtype, and the LSE [T, H] f32 when want_lse. The
// default scale is 1 / sqrt(key_width).
AttentionResult attend(const AttentionProblem& problem, const KvReader& cache, const AttentionParams& params,
                       bool want_lse);

// attend on host inputs validated as `shape` (attention_shape_of, mla_shape_of): their query and
// request fields, the page tables in either form read as the dense values they stand for.
AttentionResult attend_inputs(const AttentionShape& shape, uint32_t key_width, uint32_t value_width,
                              const HostTensor& query, const vkpaged::detail::HostRequestInputs& requests,
                              const KvReader& cache, const AttentionParams& params, bool want_lse);

// Element i of a cache tensor as the contract reads it: decode(byte) * scale for fp8.
double cache_element(const HostTensor& t, DType cache, uint64_t i, double fp8_scale);

}  // namespace vkpaged::reference::math
