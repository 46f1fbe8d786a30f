// SPDX-License-Identifier: Apache-2.0
#pragma once
// The demo's GPU state: an engine's loop in miniature over a one-layer KvCache. Each step every
// sequence brings its next tokens: a chunk of its prompt while the prompt lasts, then one token
// per decode step. Their keys and values go into the cache by record_reshape_and_cache with
// rotary embedding (keys rotated on their way in, queries in place), then one multi-query
// attention call attends every new token over its sequence's paged context (prompt chunks and
// decode requests in one batch). The steps run on two bucket plans (AttentionPlan::create_bucket:
// decode-only steps, and steps with prompt chunks), each made when a step first needs it, their
// arrays padded to the bucket; the scratch is the buckets' largest, allocated once. Host copies
// let a step be checked against the CPU reference.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "demo_blocks.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/prepare.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::cli {

struct DemoShape {
  uint32_t num_seqs = 0;
  uint32_t num_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_size = 0;
  uint32_t block_size = 0;
  uint32_t max_len = 0;  // longest context any sequence reaches
  uint32_t chunk = 0;    // most prompt tokens a sequence brings to one step
  DType dtype = DType::f16;        // queries, new keys/values, output
  DType cache_dtype = DType::f16;  // the dtype itself or an fp8 format
  KvLayout layout = KvLayout::vllm;
  std::optional<RotaryStyle> rotary = RotaryStyle::neox;  // none: plain reshape_and_cache
};

// What one step ran.
struct DemoStep {
  double attention_ns = 0;      // the attention call (GPU timestamps where the device has them, else wall clock)
  double wall_ns = 0;           // the whole step on the host: plan (when first needed), record, submit, wait
  uint32_t prompt_tokens = 0;   // new tokens of prompt chunks
  uint32_t decode_tokens = 0;   // new tokens of decode requests
  uint64_t kv_bytes = 0;        // keys and values of the contexts attended (each request's once)
  std::string plan;             // the step's attention plan, described
};

struct DemoCheck {
  bool passed = false;
  double max_error = 0;  // max |GPU - reference| over the outputs
  double tolerance = 0;
  uint64_t cache_mismatches = 0;  // stored elements that differ from encode(value), encode(rotated key)
  double rotary_error = 0;        // max |GPU - reference| of the rotated queries and keys
  uint32_t status = 0;            // kStatus* bits the shaders reported
};

class DemoSession {
 public:
  DemoSession(Context& context, const DemoShape& shape, const std::vector<uint32_t>& prompt_lens,
              uint32_t decode_steps, uint64_t seed);

  // Steps until every prompt is in and every sequence decoded its tokens.
  uint32_t total_steps() const { return total_steps_; }
  bool done() const;
  // One engine step: each sequence's next chunk or decode token written into the cache (with
  // rotary), then one attention call over all of them.
  DemoStep step();
  // The last step's output against the CPU reference on the cache as stored, its rotation
  // against the reference rotation, and every slot written so far against what it must hold.
  DemoCheck check();
  // Every pipeline the steps use (both buckets' plans, the cache write), for Context::prepare.
  PipelineSet pipelines() const;

  uint32_t num_blocks() const { return cache_.num_blocks(); }
  uint32_t blocks_in_use() const { return blocks_.blocks_in_use(); }

 private:
  struct Sequence {
    uint64_t id = 0;
    uint32_t prompt_len = 0;
    std::vector<int64_t> prompt_slots;
    uint32_t computed = 0;  // tokens whose keys and values are in the cache
    uint32_t decoded = 0;   // decode tokens done
  };
  // Keys and values of the step's tokens as the cache must hold them (keys as the GPU rotated them).
  void mirror(const std::vector<int64_t>& slots, const HostTensor& keys, const HostTensor& values);
  // The bucket of decode-only steps (one token per request) or of steps with prompt chunks.
  AttentionBucket bucket(bool decode_only) const;
  const AttentionPlan& plan(bool decode_only);
  HostTensor random_tensor(Shape shape);

  Context& ctx_;
  DemoShape shape_;
  uint32_t decode_steps_ = 0;
  uint32_t max_blocks_per_seq_ = 0;
  uint32_t total_steps_ = 0;
  uint32_t max_step_tokens_ = 0;
  std::vector<Sequence> seqs_;
  DemoBlocks blocks_;
  KvCache cache_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<float> uniform_{-1.0f, 1.0f};

  DeviceBuffer new_keys_, new_values_, query_, slots_, positions_;  // host-visible, [T] rows
  DeviceBuffer block_tables_, context_lens_, query_starts_;         // host-visible
  DeviceBuffer cos_sin_, output_, scratch_, status_;                // device
  std::optional<AttentionPlan> decode_plan_, mixed_plan_;            // made when first needed

  HostTensor key_mirror_, value_mirror_;  // what the pools must hold (written slots only)
  std::vector<int64_t> written_slots_;
  // The last step, for check().
  AttentionInputs last_;              // query (as the GPU rotated it), tables, lengths, starts
  HostTensor last_query_, last_keys_, last_positions_;  // before rotation
  HostTensor last_rotated_keys_;
};

}  // namespace vkpaged::cli
