#pragma once
// The simulation's GPU side: a KvCache of L layers and the buffers around it. Each step writes
// the copy-on-write copies and the new tokens' keys and values (random: there is no model) of
// every layer, then runs decode attention of every layer over the batch; a check gathers the
// blocks of a few sequences and compares their outputs with the CPU reference.
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "vkpaged/block_manager.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::cli {

struct SimGpuShape {
  KvCacheShape cache;
  KvCacheOptions size;
  uint32_t num_heads = 0;
  uint32_t max_blocks_per_seq = 0;  // M: the longest request's blocks
  uint32_t max_batch = 0;
  DType query_dtype = DType::f16;
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

  // Copy-on-write copies first, then the keys and values of `slots` in every layer (random
  // values, reproducible from `seed`), and random queries for `num_seqs` rows. Waits.
  void write(std::span<const BlockCopy> copies, std::span<const int64_t> slots, uint32_t num_seqs, uint64_t seed);
  // Decode attention of every layer over a batch ([S, M] tables, [S] lengths, S as in write).
  // Returns the GPU time in nanoseconds (timestamps; wall clock where the device has none).
  double decode(const BatchArrays& batch, uint32_t num_seqs);
  // The last decode's rows `rows` of layer `layer` against the CPU reference on the cache's
  // blocks as stored.
  SimCheck check(uint32_t layer, std::span<const uint32_t> rows);
  std::string plan_description(uint32_t num_seqs);

 private:
  const DecodePlan& plan_for(uint32_t num_seqs);

  Context& ctx_;
  SimGpuShape shape_;
  KvCache cache_;
  uint32_t chunk_tokens_ = 0;                    // tokens per reshape_and_cache dispatch (staging size)
  DeviceBuffer new_keys_, new_values_;           // device staging, filled on the GPU
  DeviceBuffer slots_;                           // host-visible [N * B + max_batch] i64
  std::vector<DeviceBuffer> queries_, outputs_;  // per layer, [max_batch, H, D]
  DeviceBuffer block_tables_, context_lens_;     // host-visible
  DeviceBuffer scratch_, status_;
  std::map<uint32_t, DecodePlan> plans_;  // by batch size
  // Where check() gathers the blocks it compares (host-visible, same layout as a layer).
  DeviceBuffer check_keys_, check_values_;
  uint32_t check_blocks_ = 0;
  // The last decode's batch, for check().
  uint32_t last_seqs_ = 0;
  std::vector<int32_t> last_tables_, last_lens_;
};

}  // namespace vkpaged::cli
