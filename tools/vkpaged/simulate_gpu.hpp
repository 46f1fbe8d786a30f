#pragma once
// The simulation's GPU side: a KvCache of L layers (with a host-visible swap pool when asked)
// and the buffers around it. Each step runs in the order an engine must: swap-outs and swap-ins,
// the prefill of admitted prompts, then copy-on-write copies (a forked sequence's shared last
// block, filled by that prefill) and the new tokens' keys and values (random: there is no
// model) of every layer, then decode attention of every layer over the batch. A check gathers
// the blocks of a few sequences and compares their outputs with the CPU reference;
// read_blocks gives the other checks the bytes of any blocks.
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "simulate_checks.hpp"
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
  uint32_t max_batch = 0;
  DType query_dtype = DType::f16;
  DecodeOrder order = DecodeOrder::automatic;  // of every decode (longest first: a list per step)
};

struct SimCheck {
  bool passed = false;
  uint32_t layer = 0;
  uint32_t sequences = 0;  // batch rows compared
  double max_error = 0;    // max |GPU - reference|
  double tolerance = 0;
  uint32_t status = 0;  // kStatus* bits the shaders reported
};

class SimGpu {
 public:
  SimGpu(Context& context, const SimGpuShape& shape);

  const KvCache& cache() const { return cache_; }
  uint32_t num_blocks() const { return cache_.num_blocks(); }

  // A step's first part: swap-outs ((device, host) pairs), then swap-ins ((host, device)
  // pairs), then the keys and values of the prefill slots in every layer (random values,
  // reproducible from `seed`). With `overwrite_swap_in_targets` (when checks run), the
  // swap-ins' device blocks get random bytes first, so that a check of a sequence swapped back
  // into the very blocks it left cannot pass unless the swap-in copied. Waits.
  void move_and_prefill(std::span<const BlockCopy> swap_out, std::span<const BlockCopy> swap_in,
                        std::span<const int64_t> prefill, uint64_t seed, bool overwrite_swap_in_targets);
  // Its second part: copy-on-write copies, then the keys and values of the appended tokens'
  // `slots` in every layer, and random queries for `num_seqs` rows. Waits.
  void append(std::span<const BlockCopy> copies, std::span<const int64_t> slots, uint32_t num_seqs, uint64_t seed);
  // The bytes of device blocks in every layer, as they are now. Waits.
  SimBlocks read_blocks(std::span<const int32_t> blocks);
  // Decode attention of every layer over a batch ([S, M] tables, [S] lengths, S as in append).
  // Returns the GPU time in nanoseconds (timestamps; wall clock where the device has none).
  double decode(const BatchArrays& batch, uint32_t num_seqs);
  // The last decode's rows `rows` of layer `layer` against the CPU reference on the cache's
  // blocks as stored.
  SimCheck check(uint32_t layer, std::span<const uint32_t> rows);
  std::string plan_description(uint32_t num_seqs);

 private:
  const DecodePlan& plan_for(uint32_t num_seqs);
  // reshape_and_cache of `slots` in every layer, random keys and values from (seed, stream).
  void record_writes(VkCommandBuffer cmd, std::span<const int64_t> slots, uint64_t seed, uint32_t stream);
  // Copies device blocks of one layer into the check pools (at most check_blocks_ at a time).
  void copy_to_check_pools(uint32_t layer, std::span<const BlockCopy> pairs);

  Context& ctx_;
  SimGpuShape shape_;
  KvCache cache_;
  uint32_t chunk_tokens_ = 0;                    // tokens per reshape_and_cache dispatch (staging size)
  DeviceBuffer new_keys_, new_values_;           // device staging, filled on the GPU
  DeviceBuffer slots_;                           // host-visible [N * B + max_batch] i64, one phase's
  std::vector<DeviceBuffer> queries_, outputs_;  // per layer, [max_batch, H, D]
  DeviceBuffer block_tables_, context_lens_;     // host-visible
  DeviceBuffer scratch_, status_;
  DeviceBuffer order_;  // longest first: the step's item list, shared by its layers
  std::map<uint32_t, DecodePlan> plans_;  // by batch size
  // Where check() and read_blocks() gather blocks (host-visible, same layout as a layer).
  DeviceBuffer check_keys_, check_values_;
  uint32_t check_blocks_ = 0;
  // The last decode's batch, for check().
  uint32_t last_seqs_ = 0;
  std::vector<int32_t> last_tables_, last_lens_;
};

}  // namespace vkpaged::cli
