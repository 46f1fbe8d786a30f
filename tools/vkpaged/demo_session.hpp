#pragma once
// The demo's GPU state: a paged KV cache that a batch of sequences fills token by token with
// record_reshape_and_cache while record_decode attends over it, plus the host copies that
// let a step be checked against the CPU reference.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "demo_blocks.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::cli {

struct DemoShape {
  uint32_t num_seqs = 0;
  uint32_t num_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_size = 0;
  uint32_t block_size = 0;
  uint32_t max_len = 0;  // longest context any sequence reaches
  DType dtype = DType::f16;        // queries, new keys/values, output
  DType cache_dtype = DType::f16;  // the dtype itself or an fp8 format
};

struct DemoCheck {
  bool passed = false;
  double max_error = 0;  // max |GPU - reference| over the outputs
  double tolerance = 0;
  uint64_t cache_mismatches = 0;  // stored elements that differ from encode(value)
  uint32_t status = 0;            // kStatus* bits the shaders reported
};

class DemoSession {
 public:
  DemoSession(Context& context, const DemoShape& shape, const std::vector<uint32_t>& prompt_lens, uint64_t seed);

  // Writes every prompt's keys and values into the cache.
  void prefill();
  // One decode step: each sequence's new key and value go into the cache, then every query
  // attends over its whole context. Returns the decode's time in nanoseconds (GPU timestamps
  // where the device has them, else wall clock).
  double step();
  // The last step's output against the CPU reference on the cache as stored.
  DemoCheck check();

  // Bytes of keys and values the last step's decode read.
  uint64_t kv_bytes_last_step() const { return kv_bytes_last_step_; }
  const DecodePlan& plan() const { return plan_; }
  uint32_t num_blocks() const { return num_blocks_; }
  uint32_t blocks_in_use() const { return blocks_.blocks_in_use(); }

 private:
  // Random keys and values for `slots`, written into staging, recorded into the cache and
  // mirrored on the host with the cache's rounding.
  void write_tokens(const std::vector<int64_t>& slots);
  void mirror_token(size_t token, int64_t slot, const void* key, const void* value);
  float random_value() { return uniform_(rng_); }

  Context& ctx_;
  DemoShape shape_;
  uint32_t max_blocks_per_seq_ = 0;
  uint32_t num_blocks_ = 0;
  std::vector<uint32_t> prompt_lens_;
  std::vector<uint64_t> seq_ids_;
  DemoBlocks blocks_;
  DecodePlan plan_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<float> uniform_{-1.0f, 1.0f};

  DeviceBuffer key_cache_, value_cache_;  // device
  DeviceBuffer new_keys_, new_values_, slots_;  // host-visible staging of cache writes
  DeviceBuffer query_, block_tables_, context_lens_;  // host-visible decode inputs
  DeviceBuffer output_, scratch_, status_;  // device
  size_t staging_tokens_ = 0;

  HostTensor key_mirror_, value_mirror_;  // what the caches must hold (used slots only)
  std::vector<int64_t> written_slots_;
  HostTensor last_query_;
  std::vector<int32_t> last_tables_, last_lens_;
  uint64_t kv_bytes_last_step_ = 0;
};

}  // namespace vkpaged::cli
