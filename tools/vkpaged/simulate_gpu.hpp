// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulation's GPU side: a KvCache of L layers (with a host-visible swap pool when asked)
// and the buffers around it. Each step runs in the order an engine must: swap-outs and
// swap-ins, then copy-on-write copies, then the step's new tokens (decode requests and prefill
// chunks; random keys, values and queries: there is no model) written into every layer with
// rotary embedding, then one attention call per layer over all of them. A check gathers the
// blocks of a few requests and compares their outputs with the CPU reference; read_blocks
// gives the other checks the bytes of any blocks.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "simulate_checks.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::cli {

struct SimGpuShape {
  KvCacheShape cache;
  KvCacheOptions size;  // the device blocks (one way of sizing) and the host swap blocks
  uint32_t num_heads = 0;
  uint32_t max_blocks_per_seq = 0;  // M: the longest request's blocks
  uint32_t max_batch = 0;           // requests in one call at most
  uint32_t token_budget = 0;        // new tokens in one call at most
  uint32_t max_position = 0;        // positions the cos/sin cache covers
  DType query_dtype = DType::f16;
  // automatic: every step through the attention operator (whose plan runs decode-only steps on
  // the decode kernels). grid or longest_first: decode-only steps on a DecodePlan of that order
  // through KvCache::record_decode (longest first: the list made once per step).
  DecodeOrder order = DecodeOrder::automatic;
};

// One step's attention call as host arrays: requests in the order of the call.
struct SimBatch {
  std::vector<int64_t> slots;         // [T]: where each new token's keys and values go (-1: already there)
  std::vector<int64_t> positions;     // [T]: its position in its sequence (rotary)
  std::vector<int32_t> query_starts;  // [S + 1]
  std::vector<int32_t> block_tables;  // [S * M]
  std::vector<int32_t> context_lens;  // [S]: positions attended, the new tokens included
  uint32_t requests() const { return uint32_t(context_lens.size()); }
  uint32_t tokens() const { return uint32_t(slots.size()); }
  bool decode_only() const { return tokens() == requests(); }
};

struct SimCheck {
  bool passed = false;
  uint32_t layer = 0;
  uint32_t requests = 0;  // requests compared
  uint32_t tokens = 0;    // their new tokens
  double max_error = 0;   // max |GPU - reference|
  double tolerance = 0;
  uint32_t status = 0;  // kStatus* bits the shaders reported
};

class SimGpu {
 public:
  SimGpu(Context& context, const SimGpuShape& shape);

  const KvCache& cache() const { return cache_; }
  uint32_t num_blocks() const { return cache_.num_blocks(); }

  // A step's first part: swap-outs ((device, host) pairs), then swap-ins ((host, device)
  // pairs). With `overwrite_swap_in_targets` (when checks run), the swap-ins' device blocks get
  // random bytes first, so that a check of a sequence swapped back into the very blocks it left
  // cannot pass unless the swap-in copied. Waits.
  void move(std::span<const BlockCopy> swap_out, std::span<const BlockCopy> swap_in, uint64_t seed,
            bool overwrite_swap_in_targets);
  // Its second part: copy-on-write copies, then every layer's new keys and values (rotated) into
  // the cache and queries (random, reproducible from `seed`), then every layer's attention over
  // `batch`. Returns the attention's GPU time in nanoseconds (timestamps; wall clock where the
  // device has none). Waits.
  double run_step(std::span<const BlockCopy> copies, const SimBatch& batch, uint64_t seed);
  // The bytes of device blocks in every layer, as they are now. Waits.
  SimBlocks read_blocks(std::span<const int32_t> blocks);
  // The last step's requests `requests` (indices into its batch) of layer `layer` against the
  // CPU reference on the cache's blocks as stored.
  SimCheck check(uint32_t layer, std::span<const uint32_t> requests);
  // The last step's plan, described.
  const std::string& last_plan() const { return last_plan_; }

 private:
  const DecodePlan& decode_plan_for(uint32_t num_seqs);
  // Copies device blocks of one layer into the check pools (at most check_blocks_ at a time).
  void copy_to_check_pools(uint32_t layer, std::span<const BlockCopy> pairs);
  BufferView scratch(size_t bytes);

  Context& ctx_;
  SimGpuShape shape_;
  KvCache cache_;
  DeviceBuffer new_keys_, new_values_;           // device staging, filled on the GPU
  DeviceBuffer slots_, positions_;               // host-visible [token_budget] i64
  std::vector<DeviceBuffer> queries_, outputs_;  // per layer, [token_budget, H, D]
  DeviceBuffer block_tables_, context_lens_, query_starts_;  // host-visible
  DeviceBuffer cos_sin_, scratch_, status_;
  DeviceBuffer order_;                          // longest first: the step's item list, shared by its layers
  std::map<uint32_t, DecodePlan> decode_plans_;  // by batch size
  // Where check() and read_blocks() gather blocks (host-visible, same layout as a layer).
  DeviceBuffer check_keys_, check_values_;
  uint32_t check_blocks_ = 0;
  // The last step, for check().
  SimBatch last_;
  std::string last_plan_;
};

}  // namespace vkpaged::cli
