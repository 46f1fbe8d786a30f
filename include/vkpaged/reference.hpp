#pragma once
// CPU reference implementations of every operator: double accumulation, straight from the
// contract, written for clarity and not speed. Tests and `--device cpu` use them.
#include <span>

#include "vkpaged/cache_ops.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::reference {

// Decode attention over host inputs. Validates as decode_shape_of does, and the options and
// params as the GPU path (its shape's softcap is params.softcap != 0, as decode_attention's).
VKPAGED_API DecodeResult decode_attention(const DecodeInputs& inputs, const DecodeOptions& options = {},
                                          const DecodeParams& params = {}, bool want_lse = false);

// ---- cache operations (docs/contract.md, "Cache operations"; GPU paths in cache_ops.hpp) ----
// Same checks and the same answers as the GPU paths, bit for bit; where the device flags a bad
// slot or block id, the reference refuses it (vkpaged::Error naming it) before writing.

// Writes key/value [T, Hkv, D] into the caches (in place) at slot_mapping [T] (i64 or i32;
// negative = padding). fp8 caches store encode(value * (1 / scale)).
VKPAGED_API void reshape_and_cache(const HostTensor& key, const HostTensor& value, const HostTensor& slot_mapping,
                                   HostTensor& key_cache, HostTensor& value_cache, const CacheScales& scales = {});
// One layer of copy_blocks (in place).
VKPAGED_API void copy_blocks(HostTensor& key_cache, HostTensor& value_cache, std::span<const BlockCopy> pairs);
// One layer of swap_blocks: src blocks pairs[i].src into dst blocks pairs[i].dst.
VKPAGED_API void swap_blocks(const HostTensor& src_key_cache, const HostTensor& src_value_cache,
                             HostTensor& dst_key_cache, HostTensor& dst_value_cache, std::span<const BlockCopy> pairs);
// gather: rows [seq_starts[s], seq_starts[s + 1]) of [T, Hkv, D] outputs of `output_dtype`,
// T = seq_starts[S]. Refuses decreasing seq_starts, positions past M * B and block ids >= N.
struct GatherResult {
  HostTensor key;
  HostTensor value;
};
VKPAGED_API GatherResult gather(const HostTensor& key_cache, const HostTensor& value_cache,
                                const HostTensor& block_tables, const HostTensor& seq_starts, DType output_dtype,
                                const CacheScales& scales = {});
// max |x| (NaN if x holds one), as record_absmax.
VKPAGED_API float absmax(const HostTensor& x);

}  // namespace vkpaged::reference
