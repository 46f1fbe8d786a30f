// SPDX-License-Identifier: Apache-2.0
// The code of docs/integration.md, compiled and run. Each region between "// [doc:NAME]" and
// "// [/doc:NAME]" is a snippet of the document, which IntegrationDoc.SnippetsAreThisFilesCode
// compares with this file: the document shows only code that compiles here and runs below. The
// C section's code is tests/docs/integration_step.h and integration_step.c (regions between
// "/* [doc:NAME] */" and "/* [/doc:NAME] */", compared by IntegrationDoc.CSnippetsAreTheCStepsCode),
// run below for the same three steps.
//
// The walk-through's engine runs three steps on every cache layout: prompts prefilled; then a
// fork (parallel sampling) whose append copies a block on write, a preemption by swapping out,
// and a prompt whose prefix the prefix cache holds (only the rest prefilled, attending the
// prefix through the block table); then the swapped-out sequence back in, everyone decoding.
// Each layer's attention of each step is checked against the CPU reference on a cache built
// from what every sequence's positions must hold (the keys as rotated on the GPU), so a copy,
// a swap or a prefix hit that moved the wrong bytes fails it. Also: an engine's own vLLM V1
// cache used in place, a refused call, the log callback.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "vk/context_impl.hpp"
#include "docs/integration_step.h"
#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "support/test_paths.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/log.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/prepare.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/utilities.hpp"

namespace integration_doc {

// [doc:model]
using namespace vkpaged;

// The model's attention shape, and what one step may hold.
constexpr uint32_t kLayers = 2, kHeads = 8, kKvHeads = 2, kHeadSize = 64, kBlockSize = 16;
constexpr uint32_t kMaxBlocksPerSeq = 8;     // M: contexts of up to 128 tokens
constexpr uint32_t kMaxPosition = kMaxBlocksPerSeq * kBlockSize;
constexpr uint32_t kMaxRequests = 16;        // S: requests in one step
constexpr uint32_t kMaxStepTokens = 128;     // T: new tokens in one step (the scheduler's budget)
// [/doc:model]

// [doc:cache]
// The paged cache (every layer's pools, in the engine's layout, and a host pool to swap to) and
// the scheduler's bookkeeping of its blocks.
struct EngineCache {
  KvCache cache;
  BlockManager blocks;

  EngineCache(Context& ctx, KvLayout layout, uint32_t num_blocks, uint32_t num_host_blocks)
      : cache(ctx,
              {.num_layers = kLayers, .num_kv_heads = kKvHeads, .head_size = kHeadSize, .block_size = kBlockSize,
               .dtype = DType::f16, .layout = layout},
              {.num_blocks = num_blocks, .num_host_blocks = num_host_blocks}),
        blocks(int32_t(cache.num_blocks()), int32_t(kBlockSize),
               {.num_host_blocks = int32_t(cache.num_host_blocks())}) {}
};
// [/doc:cache]

// [doc:step-plan]
// One step as the scheduler decides it on the host: the block moves, and one request per
// sequence that runs (new tokens [first, first + count) of it), decode requests first.
struct StepPlan {
  std::vector<BlockCopy> swap_out, swap_in, copies;
  std::vector<uint64_t> seqs;             // [S]
  std::vector<int64_t> slots, positions;  // [T]: where each new token's keys and values go, its position
  std::vector<int32_t> query_starts{0};   // [S + 1]
  std::vector<int32_t> context_lens;      // [S]: positions attended, the new tokens included
  std::vector<int32_t> block_tables;      // [S * M], padded with block 0
};

void add_request(const BlockManager& blocks, StepPlan& step, uint64_t seq, int32_t first,
                 const std::vector<int64_t>& slots) {
  step.seqs.push_back(seq);
  for (size_t j = 0; j < slots.size(); ++j) step.positions.push_back(first + int64_t(j));
  step.slots.insert(step.slots.end(), slots.begin(), slots.end());
  step.query_starts.push_back(step.query_starts.back() + int32_t(slots.size()));
  step.context_lens.push_back(first + int32_t(slots.size()));
  const std::vector<int32_t> table = blocks.block_table(seq, int32_t(kMaxBlocksPerSeq));
  step.block_tables.insert(step.block_tables.end(), table.begin(), table.end());
}

// A decode request: the newest token gets a slot (a new block when the last one is full; a
// copy-on-write copy of the last block when another sequence shares it).
void add_decode(BlockManager& blocks, StepPlan& step, uint64_t seq, int32_t token) {
  const AppendResult appended = blocks.append_token(seq, token);  // can_append(seq) first, else preempt
  if (appended.copy) step.copies.push_back(*appended.copy);
  add_request(blocks, step, seq, blocks.context_len(seq) - 1, {appended.slot});
}

// A prefill chunk: tokens [first, first + count) of a prompt add_sequence gave blocks to.
void add_chunk(BlockManager& blocks, StepPlan& step, uint64_t seq, int32_t first, int32_t count) {
  add_request(blocks, step, seq, first, blocks.slot_mapping(seq, first, count));
}
// [/doc:step-plan]

// [doc:admit]
// A new request: the prefix cache says how many leading tokens (whole blocks) are already in
// the cache; the step prefills the rest, attending the cached prefix through the block table.
// Returns the tokens to prefill, or -1 to try again later.
int32_t admit(BlockManager& blocks, StepPlan& step, uint64_t seq, std::span<const int32_t> prompt,
              int32_t max_chunk) {
  if (blocks.can_allocate(prompt) != AdmissionStatus::ok) return -1;  // later (or never: too long)
  int32_t cached = blocks.add_sequence(seq, prompt);
  const int32_t len = int32_t(prompt.size());
  if (cached == len) cached = len - 1;  // all cached: the last token still needs its query
  const int32_t count = std::min(len - cached, max_chunk);  // the rest in later steps' chunks
  add_chunk(blocks, step, seq, cached, count);
  return len - cached;
}

// Parallel sampling: after its prompt, a request with n samples becomes n sequences that share
// the prompt's blocks. Their first appends copy the partly filled last block on write.
void fork_samples(BlockManager& blocks, uint64_t parent, std::span<const uint64_t> children) {
  for (const uint64_t child : children) blocks.fork(parent, child);
}
// [/doc:admit]

// [doc:preempt]
// Out of blocks (can_append false): the newest running sequence leaves before anything is
// recorded. Swapped out while the host pool has room: (device, host) pairs, copied first thing
// in the step. Else recomputed: its blocks are freed, and it comes back later through admit()
// with its prompt and what it generated (the prefix cache may still hold some of it).
enum class Preempted { swapped, recompute };
Preempted preempt(BlockManager& blocks, StepPlan& step, uint64_t victim) {
  if (blocks.can_swap_out(std::span(&victim, 1))) {
    const std::vector<BlockCopy> pairs = blocks.swap_out(victim);
    step.swap_out.insert(step.swap_out.end(), pairs.begin(), pairs.end());
    return Preempted::swapped;
  }
  blocks.preempt(victim);
  return Preempted::recompute;
}

// Back in when the device has room again: (host, device) pairs, copied before anything reads
// its blocks. It then decodes as before.
bool resume(BlockManager& blocks, StepPlan& step, uint64_t seq) {
  if (blocks.can_swap_in(std::span(&seq, 1)) != AdmissionStatus::ok) return false;
  const std::vector<BlockCopy> pairs = blocks.swap_in(seq);
  step.swap_in.insert(step.swap_in.end(), pairs.begin(), pairs.end());
  return true;
}
// [/doc:preempt]

// [doc:buffers]
// What a step's calls read and write, sized for the largest step. The arrays are host-visible:
// the host writes them before the submission, so a step in flight keeps its own (an engine
// alternates two sets, or waits for the step's fence before writing the next). The activations
// are per layer here so that the test can read every layer's; an engine reuses one set across
// layers. The scratch is allocated once, for the largest any step needs (section 3): replacing it
// with a larger one would free a buffer that a step in flight may still read.
struct StepBuffers {
  DeviceBuffer slots, positions, block_tables, context_lens, query_starts;  // host-visible
  std::vector<DeviceBuffer> query, key, value, output;                      // [T, H or Hkv, D] per layer
  DeviceBuffer cos_sin, scratch, status;

  StepBuffers(Context& ctx, size_t scratch_bytes) {
    auto host = [&](size_t bytes) { return ctx.create_buffer(bytes, MemoryKind::host_visible); };
    slots = host(kMaxStepTokens * sizeof(int64_t));
    positions = host(kMaxStepTokens * sizeof(int64_t));
    block_tables = host(kMaxRequests * kMaxBlocksPerSeq * sizeof(int32_t));
    context_lens = host(kMaxRequests * sizeof(int32_t));
    query_starts = host((kMaxRequests + 1) * sizeof(int32_t));
    for (uint32_t l = 0; l < kLayers; ++l) {
      query.push_back(ctx.create_buffer(kMaxStepTokens * kHeads * kHeadSize * sizeof(uint16_t)));
      key.push_back(ctx.create_buffer(kMaxStepTokens * kKvHeads * kHeadSize * sizeof(uint16_t)));
      value.push_back(ctx.create_buffer(kMaxStepTokens * kKvHeads * kHeadSize * sizeof(uint16_t)));
      output.push_back(ctx.create_buffer(kMaxStepTokens * kHeads * kHeadSize * sizeof(uint16_t)));
    }
    // The cos/sin cache vLLM's RotaryEmbedding builds: [max_position, rotary_dim] f32.
    const HostTensor cos_sin_host = rotary_cos_sin_cache(kMaxPosition, kHeadSize);
    cos_sin = ctx.create_buffer(cos_sin_host.bytes());
    ctx.upload(cos_sin.view(), cos_sin_host.data(), cos_sin_host.bytes());
    status = ctx.create_buffer(4);
    const uint32_t zero = 0;
    ctx.upload(status.view(), &zero, sizeof(zero));
    if (scratch_bytes > 0) scratch = ctx.create_buffer(scratch_bytes);
  }

  // The step's arrays, padded to its plan's bucket (section 8): its requests first, then
  // requests of no new tokens and length 0; its tokens first, then tokens of no slot (skipped)
  // at position 0.
  void write(const StepPlan& step, const AttentionPlan& plan) const {
    const size_t S = plan.shape().num_requests, T = plan.shape().num_query_tokens;
    auto put = [](const DeviceBuffer& b, auto v, size_t n, auto pad) {
      v.resize(n, pad);
      std::memcpy(b.mapped(), v.data(), n * sizeof(v[0]));
    };
    put(slots, step.slots, T, int64_t(-1));
    put(positions, step.positions, T, int64_t(0));
    put(block_tables, step.block_tables, S * kMaxBlocksPerSeq, 0);
    put(context_lens, step.context_lens, S, 0);
    put(query_starts, step.query_starts, S + 1, step.query_starts.back());
  }
};
// [/doc:buffers]

// [doc:barriers]
// Makes `src_access` of `src_stage` available and visible to `dst_access` of `dst_stage`.
void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
             VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  const VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, src_access, dst_access};
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}
constexpr VkPipelineStageFlags kCompute = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
constexpr VkPipelineStageFlags kTransfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kShaderRW = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
constexpr VkAccessFlags kTransferRW = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
// [/doc:barriers]

// [doc:plan]
// Once, at start-up: a plan per bucket of steps, which every step inside it runs (section 8):
// decode-only steps (each request one new token) on the decode kernels, steps with prompt chunks
// on the attention kernels. Each is sized for its bucket's largest step (S requests, T new
// tokens, contexts of M * B), so the scratch is allocated once, the larger of the two. One plan
// serves every layer; its pipelines are built now, not in the first step.
struct EnginePlans {
  AttentionPlan decode, mixed;

  EnginePlans(Context& ctx, const KvCache& cache)
      : decode(AttentionPlan::create_bucket(ctx, cache.attention_shape(bucket(kMaxRequests)), 1)),
        mixed(AttentionPlan::create_bucket(ctx, cache.attention_shape(bucket(kMaxStepTokens)), kMaxStepTokens)) {}

  static AttentionShape bucket(uint32_t tokens) {
    return {.num_requests = kMaxRequests, .num_query_tokens = tokens, .num_heads = kHeads,
            .max_blocks_per_seq = kMaxBlocksPerSeq, .query_dtype = DType::f16};
  }
  const AttentionPlan& for_step(const StepPlan& step) const {
    return step.slots.size() == step.seqs.size() ? decode : mixed;  // every request one new token: decode
  }
  size_t scratch_bytes() const { return std::max(decode.scratch_bytes(), mixed.scratch_bytes()); }
};
// [/doc:plan]

// [doc:record]
// The model's kernels that write a layer's queries, keys and values for the step's tokens.
using ProjectQkv = std::function<void(VkCommandBuffer, uint32_t layer, const TensorView& query,
                                      const TensorView& key, const TensorView& value)>;

// The step's block moves: swaps and copy-on-write copies, every layer's pools.
void record_moves(VkCommandBuffer cmd, const KvCache& cache, const StepPlan& step) {
  // The previous step's cache writes and reads finish before this step's copies touch blocks.
  barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kTransfer, kTransferRW);
  // 1. Swaps, out before in: a block a swap-out frees may be where a swap-in lands.
  if (!step.swap_out.empty()) {
    cache.record_swap_out(cmd, step.swap_out);
    barrier(cmd, kTransfer, VK_ACCESS_TRANSFER_WRITE_BIT, kTransfer, kTransferRW);
  }
  if (!step.swap_in.empty()) {
    cache.record_swap_in(cmd, step.swap_in);
    barrier(cmd, kTransfer, VK_ACCESS_TRANSFER_WRITE_BIT, kTransfer, kTransferRW);
  }
  // 2. Copy-on-write copies, before a new token is written into a copy.
  if (!step.copies.empty()) cache.record_copy_blocks(cmd, step.copies);
  barrier(cmd, kTransfer, VK_ACCESS_TRANSFER_WRITE_BIT, kCompute, kShaderRW);
}

// 3. Layer by layer: the new tokens' keys and values into the cache, the keys rotated on their
//    way in and the queries in place (one dispatch); then attention of every request at once.
//    Every view is the plan's bucket's (S requests, T tokens): the step's arrays are padded to it.
void record_layers(VkCommandBuffer cmd, const KvCache& cache, const AttentionPlan& plan, const StepBuffers& buf,
                   const ProjectQkv& project_qkv) {
  const int64_t S = plan.shape().num_requests, T = plan.shape().num_query_tokens;
  const TensorView slots = buf.slots.tensor(DType::i64, Shape{T});
  const TensorView positions = buf.positions.tensor(DType::i64, Shape{T});
  const TensorView cos_sin = buf.cos_sin.tensor(DType::f32, Shape{kMaxPosition, kHeadSize});
  for (uint32_t l = 0; l < kLayers; ++l) {
    const TensorView query = buf.query[l].tensor(DType::f16, Shape{T, kHeads, kHeadSize});
    const TensorView key = buf.key[l].tensor(DType::f16, Shape{T, kKvHeads, kHeadSize});
    const TensorView value = buf.value[l].tensor(DType::f16, Shape{T, kKvHeads, kHeadSize});
    project_qkv(cmd, l, query, key, value);
    barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kCompute, kShaderRW);
    cache.record_reshape_and_cache(cmd, l, {.key = key, .value = value, .slot_mapping = slots, .status = buf.status.view()},
                                   RotaryInputs{.query = query, .positions = positions, .cos_sin_cache = cos_sin});
    barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kCompute, kShaderRW);
    AttentionViews views;  // the pools: the cache's own, of layer l
    views.query = query;
    views.block_tables = buf.block_tables.tensor(DType::i32, Shape{S, kMaxBlocksPerSeq});
    views.context_lens = buf.context_lens.tensor(DType::i32, Shape{S});
    views.query_starts = buf.query_starts.tensor(DType::i32, Shape{S + 1});
    views.output = buf.output[l].tensor(DType::f16, Shape{T, kHeads, kHeadSize});
    if (plan.scratch_bytes() > 0) views.scratch = buf.scratch.view(0, plan.scratch_bytes());
    views.status = buf.status.view();
    cache.record_attention(cmd, l, plan, views);
    // The output for the layer's next kernels; the scratch free for the next layer's attention.
    barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kCompute, kShaderRW);
  }
  // The outputs and the status word for whoever reads them next (here transfers and the host).
  barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kTransfer | VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
}

void record_step(VkCommandBuffer cmd, const KvCache& cache, const StepPlan& step, const AttentionPlan& plan,
                 const StepBuffers& buf, const ProjectQkv& project_qkv) {
  record_moves(cmd, cache, step);
  record_layers(cmd, cache, plan, buf, project_qkv);
}
// [/doc:record]

// [doc:run]
void run_step(Context& ctx, const KvCache& cache, const EnginePlans& plans, const StepPlan& step, StepBuffers& buf,
              const ProjectQkv& project_qkv) {
  const AttentionPlan& plan = plans.for_step(step);
  buf.write(step, plan);
  // An engine records the step into its own command buffer, between the model's other kernels,
  // and submits it to its own queue (or replays one recorded before: section 8); here the
  // Context's convenience records, submits and waits.
  ctx.run_and_wait([&](VkCommandBuffer cmd) { record_step(cmd, cache, step, plan, buf, project_qkv); });
}
// [/doc:run]

// [doc:replay]
// A bucket's step recorded once into the engine's own command buffer and submitted for every
// step of the bucket, as a CUDA graph is captured once and replayed: the layers read the step's
// lengths, block tables and query starts from the device, so only those arrays change between
// submissions. The block moves differ from step to step: they go first, in a small command
// buffer recorded per step, in the same submission.
class ReplayedStep {
 public:
  ReplayedStep(Context& ctx, const KvCache& cache, const AttentionPlan& plan, const StepBuffers& buf,
               const ProjectQkv& project_qkv)
      : device_(ctx.device()), queue_(ctx.queue()), plan_(plan) {
    try {
      VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
      pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;  // the moves are recorded again
      pool_info.queueFamilyIndex = ctx.queue_family();
      check(vkCreateCommandPool(device_, &pool_info, nullptr, &pool_));
      VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, pool_,
                                        VK_COMMAND_BUFFER_LEVEL_PRIMARY, 2};
      check(vkAllocateCommandBuffers(device_, &alloc, cmds_));
      VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, nullptr, VK_FENCE_CREATE_SIGNALED_BIT};
      check(vkCreateFence(device_, &fence_info, nullptr, &fence_));
      const VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};  // not one-time: replayed
      check(vkBeginCommandBuffer(cmds_[1], &begin));
      record_layers(cmds_[1], cache, plan, buf, project_qkv);
      check(vkEndCommandBuffer(cmds_[1]));
    } catch (...) {
      release();  // what was made before the failure
      throw;
    }
  }
  ~ReplayedStep() { release(); }
  ReplayedStep(const ReplayedStep&) = delete;
  ReplayedStep& operator=(const ReplayedStep&) = delete;

  // A step of the bucket: once the previous replay is done (its arrays are rewritten here), the
  // step's moves and the recorded layers in one submission.
  void submit(const KvCache& cache, const StepPlan& step, const StepBuffers& buf) {
    check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
    check(vkResetFences(device_, 1, &fence_));
    buf.write(step, plan_);
    const VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr,
                                         VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    check(vkBeginCommandBuffer(cmds_[0], &begin));  // resets it
    record_moves(cmds_[0], cache, step);
    check(vkEndCommandBuffer(cmds_[0]));
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 2;
    submit.pCommandBuffers = cmds_;
    check(vkQueueSubmit(queue_, 1, &submit, fence_));
  }
  void wait() const { check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX)); }

 private:
  static void check(VkResult r) {
    if (r != VK_SUCCESS) throw std::runtime_error("Vulkan error " + std::to_string(int(r)));
  }
  void release() noexcept {
    if (fence_ != VK_NULL_HANDLE) vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);  // the last replay's
    vkDestroyFence(device_, fence_, nullptr);  // VK_NULL_HANDLE: nothing
    vkDestroyCommandPool(device_, pool_, nullptr);  // and its command buffers
  }
  VkDevice device_;
  VkQueue queue_;
  const AttentionPlan& plan_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmds_[2] = {};  // the step's moves, the recorded layers
  VkFence fence_ = VK_NULL_HANDLE;
};
// [/doc:replay]

// [doc:startup]
// At start-up, before the first step: every pipeline of the buckets' plans and of the cache
// write built at once, on several threads, from the last run's pipeline cache where it holds
// them. Returns the cache to save for the next run.
std::vector<uint8_t> start_up(Context& ctx, const KvCache& cache, const std::vector<uint8_t>& saved,
                              std::string& refused) {
  PipelineSet set;
  set.attention.push_back({cache.attention_shape(EnginePlans::bucket(kMaxRequests)), 1});
  set.attention.push_back({cache.attention_shape(EnginePlans::bucket(kMaxStepTokens)), kMaxStepTokens});
  set.cache_writes.push_back(CacheWriteKind::of(cache, DType::f16, RotaryWrite{.rotary_dim = kHeadSize}));
  try {
    if (!saved.empty()) ctx.load_pipeline_cache(saved);
  } catch (const Error& e) {
    refused = e.what();  // another device or driver (an update), or a damaged file: built afresh
  }
  ctx.prepare(set);
  return ctx.pipeline_cache_data();
}
// [/doc:startup]

// [doc:external]
// An engine that keeps its own cache uses it in place: vLLM V1's flash-attention cache of one
// layer is one buffer [2, N, B, Hkv, D] (keys, then values), each half the nhd layout.
LayerCacheViews vllm_v1_layer(VkBuffer kv_cache, VkDeviceSize offset, int64_t num_blocks, DType dtype) {
  const Shape pool{num_blocks, kBlockSize, kKvHeads, kHeadSize};
  const VkDeviceSize pool_bytes = VkDeviceSize(pool.numel()) * dtype_size(dtype);
  return {.key_cache = {{kv_cache, offset, pool_bytes}, dtype, pool},
          .value_cache = {{kv_cache, offset + pool_bytes, pool_bytes}, dtype, pool},
          .layout = KvLayout::nhd};
}

// The same two calls on those views: the free functions take the pools with the layout.
void record_layer(Context& ctx, VkCommandBuffer cmd, const LayerCacheViews& layer, const NewTokens& tokens,
                  const RotaryInputs& rotary, const AttentionPlan& plan, AttentionViews views) {
  record_reshape_and_cache_rotary(ctx, cmd,
                                  {.key = tokens.key, .value = tokens.value, .slot_mapping = tokens.slot_mapping,
                                   .key_cache = layer.key_cache, .value_cache = layer.value_cache,
                                   .status = tokens.status, .layout = layer.layout},
                                  rotary);
  barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kCompute, kShaderRW);
  views.key_cache = layer.key_cache;
  views.value_cache = layer.value_cache;
  record_attention(ctx, cmd, plan, views);  // plan: an AttentionShape with kv_layout = nhd
}
// [/doc:external]

// [doc:log]
// vkpaged's messages (validation-layer reports, asked-for statistics) go to the engine's log.
void engine_log(LogLevel level, const char* message, void* user_data) {
  auto& lines = *static_cast<std::vector<std::string>*>(user_data);
  lines.push_back(std::string(to_string(level)) + ": " + message);
}
void install_log(std::vector<std::string>& lines) { set_log_callback(engine_log, &lines, LogLevel::warning); }
// [/doc:log]

// [doc:errors]
// A refused call throws before it records anything: the command buffer holds what was recorded
// before it and can still be submitted or reset. Returns "" or what was refused.
std::string try_record_attention(const KvCache& cache, VkCommandBuffer cmd, uint32_t layer,
                                 const AttentionPlan& plan, const AttentionViews& views) {
  try {
    cache.record_attention(cmd, layer, plan, views);
    return "";
  } catch (const Error& e) {
    // invalid_argument: a shape, index or value the contract refuses; unsupported: valid, but
    // not on this device; out_of_memory, device_error, io_error, internal. The message names the
    // argument and its value.
    return std::string(to_string(e.code())) + ": " + e.what();
  }
}

// What the shaders met on the device and skipped (the host cannot check values it never sees):
// bits of the status word, read after the step.
std::string describe_status(uint32_t status) {
  std::string s;
  if (status & kStatusBadBlockId) s += "a block id >= N; ";
  if (status & kStatusBadContextLen) s += "a context length > M * B or below its request's new tokens; ";
  if (status & kStatusBadSlot) s += "a slot >= N * B; ";
  if (status & kStatusBadQueryStarts) s += "query starts that do not rise within [0, T]; ";
  if (status & kStatusBadPosition) s += "a position outside the cos/sin cache; ";
  return s;
}
// [/doc:errors]

// [doc:mla-layer]
// DeepSeek-V2/V3's attention after absorption: one latent kv head whose rows hold the latent
// (512) then the rotary key part (64); the value is a row's first 512 entries.
constexpr uint32_t kLatent = 512, kRope = 64, kMlaRow = kLatent + kRope;

// Every layer's MLA pool [N, B, 576], vLLM's form (KvCacheKind::mla_two_pools keeps FlashInfer's
// ckv [N, B, 512] and kpe [N, B, 64] apart instead).
KvCache make_mla_cache(Context& ctx, uint32_t num_blocks) {
  return KvCache(ctx,
                 {.num_layers = kLayers, .num_kv_heads = 1, .head_size = kLatent, .block_size = kBlockSize,
                  .dtype = DType::bf16, .layout = KvLayout::nhd, .kind = KvCacheKind::mla_one_pool,
                  .rope_head_size = kRope},
                 {.num_blocks = num_blocks});
}

// DeepSeek-V3's softmax scale: 1/sqrt(128 + 64), the q.k width of a head before absorption (not
// 576, the plan's default), times YaRN's mscale squared (its rope_scaling: factor 40,
// mscale_all_dim 1).
float deepseek_softmax_scale(double factor = 40.0, double mscale_all_dim = 1.0) {
  const double mscale = factor > 1.0 ? 0.1 * mscale_all_dim * std::log(factor) + 1.0 : 1.0;
  return float(mscale * mscale / std::sqrt(128.0 + 64.0));
}

// Once per step, for every MLA layer. A step of few requests splits the key positions (the plan's
// scratch_bytes() then is not 0): the default options choose.
MlaPlan plan_mla_step(Context& ctx, const KvCache& cache, uint32_t heads, const StepPlan& step,
                      const MlaOptions& options = {}) {
  MlaShape shape;
  shape.attention = {.num_requests = uint32_t(step.seqs.size()), .num_query_tokens = uint32_t(step.slots.size()),
                     .num_heads = heads, .num_kv_heads = 1, .head_size = kMlaRow, .block_size = kBlockSize,
                     .num_blocks = cache.num_blocks(), .max_blocks_per_seq = kMaxBlocksPerSeq,
                     .query_dtype = DType::bf16, .cache_dtype = DType::bf16, .kv_layout = KvLayout::nhd};
  shape.value_head_size = kLatent;
  return MlaPlan::create(ctx, shape, step.query_starts, options);
}

// What the engine's projections made for one layer, and the step's arrays.
struct MlaLayerViews {
  TensorView query;             // [T, H, 576]: q_nope W_UK (the latent space), then q_pe (rotated here)
  TensorView kv_c, k_pe;        // [T, 512] (the normed latent), [T, 64] (before RoPE)
  TensorView slots, positions;  // [T] i64
  TensorView cos_sin;           // [max_position, 64] f32: the model's (YaRN) table
  TensorView block_tables, context_lens, query_starts;
  TensorView output;            // [T, H, 512]: in the latent space; the engine applies W_UV, then W_O
  BufferView scratch;           // plan.scratch_bytes() of the step's scratch (section 3), when not 0
};

void record_mla_layer(Context& ctx, VkCommandBuffer cmd, const KvCache& cache, uint32_t layer, const MlaPlan& plan,
                      const MlaLayerViews& v, float softmax_scale) {
  // RoPE on q_pe, in place: a strided view of every head's last 64 entries. DeepSeek rotates
  // interleaved pairs (vLLM's is_neox_style = False).
  const int64_t T = v.query.shape[0], H = v.query.shape[1];
  const BufferView q = v.query.memory;
  const TensorView q_pe{{q.buffer, q.offset + kLatent * 2, q.size - kLatent * 2}, DType::bf16, Shape{T, H, kRope},
                        Strides{H * kMlaRow, kMlaRow}};
  record_rotary_embedding(
      ctx, cmd, {.query = q_pe, .positions = v.positions, .cos_sin_cache = v.cos_sin, .style = RotaryStyle::gptj});
  record_compute_barrier(ctx, cmd);  // both may write the status word (a stand-in of vkpaged's when none is given)
  // The new tokens' rows: kv_c, then k_pe rotated on its way in.
  const MlaRopeViews rope{v.positions, v.cos_sin, RotaryStyle::gptj};
  cache.record_mla_reshape_and_cache(cmd, layer, {.kv_c = v.kv_c, .k_pe = v.k_pe, .slot_mapping = v.slots}, 1.0f,
                                     &rope);
  record_compute_barrier(ctx, cmd);  // the rotated query and the new rows, before attention reads them
  record_mla_attention(ctx, cmd, plan,
                       {.query = v.query, .mla_cache = cache.mla_cache(layer).mla_cache, .block_tables = v.block_tables,
                        .context_lens = v.context_lens, .query_starts = v.query_starts, .output = v.output,
                        .scratch = v.scratch},
                       {.scale = softmax_scale});
}
// [/doc:mla-layer]

}  // namespace integration_doc

namespace vkpaged::test {
namespace {

using namespace integration_doc;

// ---- the snippets are the code of this file and of the C step ----

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    out += line + "\n";
  }
  while (!out.empty() && out.front() == '\n') out.erase(0, 1);
  while (out.size() > 1 && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

// How a language's comments mark a region: "// [doc:NAME]" ... "// [/doc:NAME]" in C++,
// "/* [doc:NAME] */" ... "/* [/doc:NAME] */" in C, each on a line of its own.
struct RegionMarks {
  std::string open, close;  // around "[doc:NAME]"
};
const RegionMarks kCppMarks{"// ", ""}, kCMarks{"/* ", " */"};

// The regions of a source, by name, added to `regions`.
void add_regions(const std::string& source, const RegionMarks& marks, std::map<std::string, std::string>& regions) {
  const std::string open = "\n" + marks.open + "[doc:", name_end_mark = "]" + marks.close + "\n";
  for (size_t at = source.find(open); at != std::string::npos; at = source.find(open, at + 1)) {
    const size_t name_begin = at + open.size(), name_end = source.find(name_end_mark, name_begin);
    const std::string name = source.substr(name_begin, name_end - name_begin);
    const std::string close = marks.open + "[/doc:" + name + name_end_mark;
    const size_t body = name_end + name_end_mark.size(), end = source.find(close, body);
    if (end == std::string::npos) {
      ADD_FAILURE() << "region '" << name << "' is not closed";
      continue;
    }
    EXPECT_FALSE(regions.contains(name)) << "region '" << name << "' twice";
    regions[name] = trim_lines(source.substr(body, end - body));
  }
}

// What is wrong with the document's ```<language> blocks against the regions: each block must
// follow a line "<!-- snippet: NAME -->" and be region NAME, line for line, and every region
// must be shown. One line per problem; none when all is well.
std::vector<std::string> snippet_problems(const std::string& doc, const std::string& language,
                                          const std::map<std::string, std::string>& regions) {
  std::vector<std::string> problems;
  std::map<std::string, int> shown;
  const std::string fence = "```" + language + "\n", marker = "<!-- snippet: ";
  for (size_t at = doc.find(fence); at != std::string::npos; at = doc.find(fence, at + 1)) {
    const size_t line_start = doc.rfind('\n', at - 2) + 1;
    const std::string before = doc.substr(line_start, at - 1 - line_start);
    const size_t end = doc.find("```\n", at + fence.size());
    if (end == std::string::npos) {
      problems.push_back("a " + fence.substr(0, fence.size() - 1) + " block is not closed");
      break;
    }
    if (before.rfind(marker, 0) != 0) {
      problems.push_back("a " + fence.substr(0, fence.size() - 1) + " block without a snippet marker before it: '" +
                         before + "'");
      continue;
    }
    const std::string name = before.substr(marker.size(), before.find(" -->") - marker.size());
    ++shown[name];
    if (!regions.contains(name))
      problems.push_back("snippet '" + name + "' is no region of the code");
    else if (trim_lines(doc.substr(at + fence.size(), end - at - fence.size())) != regions.at(name))
      problems.push_back("snippet '" + name + "' differs from its region");
  }
  for (const auto& [name, code] : regions)
    if (!shown.contains(name)) problems.push_back("snippet '" + name + "' is not shown");
  return problems;
}

std::string lines(const std::vector<std::string>& problems) {
  std::string s;
  for (const std::string& p : problems) s += p + "\n";
  return s;
}

std::map<std::string, std::string> cpp_regions() {
  std::map<std::string, std::string> regions;
  add_regions(slurp(test_data_path("test_integration.cpp")), kCppMarks, regions);
  return regions;
}

std::map<std::string, std::string> c_regions() {
  std::map<std::string, std::string> regions;
  add_regions(slurp(test_data_path("integration_step.h")), kCMarks, regions);
  add_regions(slurp(test_data_path("integration_step.c")), kCMarks, regions);
  return regions;
}

TEST(IntegrationDoc, SnippetsAreThisFilesCode) {
  const std::string doc = slurp(test_data_path("integration.md"));
  ASSERT_FALSE(doc.empty());
  const std::map<std::string, std::string> regions = cpp_regions();
  EXPECT_GE(regions.size(), 10u);
  // Every C++ block of the document follows "<!-- snippet: NAME -->" and is that region.
  EXPECT_EQ(lines(snippet_problems(doc, "cpp", regions)), "")
      << "docs/integration.md against tests/docs/test_integration.cpp";
}

// The same for the C section: its ```c blocks are regions of tests/docs/integration_step.h and .c.
TEST(IntegrationDoc, CSnippetsAreTheCStepsCode) {
  const std::string doc = slurp(test_data_path("integration.md"));
  ASSERT_FALSE(doc.empty());
  const std::map<std::string, std::string> regions = c_regions();
  EXPECT_GE(regions.size(), 5u);
  EXPECT_EQ(lines(snippet_problems(doc, "c", regions)), "")
      << "docs/integration.md against tests/docs/integration_step.h and integration_step.c";
}

// The checks fail where the document and the code part: a line of a block edited, a marker
// missing, a region not shown; in either language, and a C edit is no C++ problem.
TEST(IntegrationDoc, AnEditedSnippetFailsTheCheck) {
  const std::string doc = slurp(test_data_path("integration.md"));
  const auto c = c_regions();
  const auto cpp = cpp_regions();
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string d = doc;
    const size_t at = d.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) d.replace(at, from.size(), to);
    return d;
  };
  const std::string c_line = "TRY(vkp_kv_cache_record_attention(cache, cmd, l, plan, &views, NULL));";
  const std::string c_edit = edited(c_line, "TRY(vkp_kv_cache_record_attention(cache, cmd, 0, plan, &views, NULL));");
  EXPECT_EQ(snippet_problems(c_edit, "c", c), std::vector<std::string>{"snippet 'c-record' differs from its region"});
  EXPECT_EQ(lines(snippet_problems(c_edit, "cpp", cpp)), "");
  const std::vector<std::string> unmarked = snippet_problems(edited("<!-- snippet: c-plan -->\n", "\n"), "c", c);
  ASSERT_EQ(unmarked.size(), 2u) << lines(unmarked);
  EXPECT_NE(unmarked[0].find("a ```c block without a snippet marker"), std::string::npos) << unmarked[0];
  EXPECT_EQ(unmarked[1], "snippet 'c-plan' is not shown");
  EXPECT_EQ(snippet_problems(edited("<!-- snippet: c-run -->", "<!-- snippet: c-running -->"), "c", c),
            (std::vector<std::string>{"snippet 'c-running' is no region of the code", "snippet 'c-run' is not shown"}));
  const std::string cpp_edit = edited("    cache.record_attention(cmd, l, plan, views);\n",
                                      "    cache.record_attention(cmd, 0, plan, views);\n");
  EXPECT_EQ(snippet_problems(cpp_edit, "cpp", cpp),
            std::vector<std::string>{"snippet 'record' differs from its region"});
  EXPECT_EQ(lines(snippet_problems(cpp_edit, "c", c)), "");
}

// ---- the walk-through's engine, three steps ----

// What each sequence's positions must hold, per layer: the keys as the GPU rotated them and the
// values, as f16.
using Row = std::vector<float>;  // [Hkv * D]
struct Position {
  std::array<Row, kLayers> key, value;
};
using Mirror = std::map<uint64_t, std::vector<Position>>;

// A step as the checks see it: its requests, and per layer what it wrote (queries and keys as
// rotated, values, outputs), read back after it ran; and the status word.
struct StepRecord {
  std::vector<uint64_t> seqs;
  std::vector<int64_t> positions;
  std::vector<int32_t> query_starts, context_lens;
  std::array<HostTensor, kLayers> query, key, value, output;
  uint32_t status = 0;
};

// The sequences' positions as the steps wrote them (a mirror of the cache, sequence by sequence),
// and every layer's attention of a step against the reference on a cache built from it: a copy,
// a swap or a prefix hit that moved the wrong bytes fails the check.
class StepChecker {
 public:
  Mirror& mirror() { return mirror_; }

  void remember(const StepRecord& step) {
    const size_t row = size_t(kKvHeads) * kHeadSize;
    for (uint32_t l = 0; l < kLayers; ++l)
      for (size_t r = 0; r < step.seqs.size(); ++r)
        for (int32_t t = step.query_starts[r]; t < step.query_starts[r + 1]; ++t) {
          auto& positions = mirror_[step.seqs[r]];
          const size_t p = size_t(step.positions[size_t(t)]);
          if (positions.size() <= p) positions.resize(p + 1);
          Row k(row), v(row);
          for (size_t i = 0; i < row; ++i) {
            k[i] = float(step.key[l].get(size_t(t) * row + i));
            v[i] = float(step.value[l].get(size_t(t) * row + i));
          }
          positions[p].key[l] = std::move(k);
          positions[p].value[l] = std::move(v);
        }
  }

  void check(const StepRecord& step, KvLayout layout, const std::string& label) {
    const int64_t S = int64_t(step.seqs.size());
    const KvBlockGeometry g{kKvHeads, kHeadSize, kBlockSize, cache_pack_factor(DType::f16)};
    int64_t blocks = 0;
    std::vector<int64_t> base;
    for (int32_t len : step.context_lens) {
      base.push_back(blocks);
      blocks += (len + kBlockSize - 1) / kBlockSize;
    }
    for (uint32_t l = 0; l < kLayers; ++l) {
      AttentionInputs in;
      in.query = step.query[l];  // rotated
      in.kv_layout = layout;
      const int64_t x = 8, N = blocks, Hkv = kKvHeads, D = kHeadSize, B = kBlockSize;
      in.key_cache = HostTensor(DType::f16, layout == KvLayout::vllm  ? Shape{N, Hkv, D / x, B, x}
                                            : layout == KvLayout::nhd ? Shape{N, B, Hkv, D}
                                                                      : Shape{N, Hkv, B, D});
      in.value_cache = HostTensor(DType::f16, layout == KvLayout::vllm  ? Shape{N, Hkv, D, B}
                                              : layout == KvLayout::nhd ? Shape{N, B, Hkv, D}
                                                                        : Shape{N, Hkv, B, D});
      in.block_tables = HostTensor(DType::i32, Shape{S, kMaxBlocksPerSeq});
      in.context_lens = HostTensor(DType::i32, Shape{S});
      in.query_starts = HostTensor(DType::i32, Shape{S + 1});
      for (int64_t s = 0; s <= S; ++s) in.query_starts.as<int32_t>()[s] = step.query_starts[size_t(s)];
      for (int64_t s = 0; s < S; ++s) {
        const int32_t len = step.context_lens[size_t(s)];
        in.context_lens.as<int32_t>()[s] = len;
        const auto& positions = mirror_.at(step.seqs[size_t(s)]);
        ASSERT_GE(positions.size(), size_t(len)) << label;
        for (int32_t p = 0; p < len; ++p) {
          const int64_t block = base[size_t(s)] + p / kBlockSize;
          in.block_tables.as<int32_t>()[s * kMaxBlocksPerSeq + p / kBlockSize] = int32_t(block);
          for (uint32_t h = 0; h < kKvHeads; ++h)
            for (uint32_t d = 0; d < kHeadSize; ++d) {
              const uint64_t at = uint64_t(block) * g.block_elements();
              const uint32_t o = uint32_t(p % kBlockSize);
              in.key_cache.set(at + g.key_offset(layout, h, d, o), positions[size_t(p)].key[l][h * kHeadSize + d]);
              in.value_cache.set(at + g.value_offset(layout, h, d, o), positions[size_t(p)].value[l][h * kHeadSize + d]);
            }
        }
      }
      const AttentionResult want = reference::batch_attention(in);
      EXPECT_LE(max_abs_diff(step.output[l], want.output), tolerance(DType::f16, DType::f16))
          << label << " layer " << l;
    }
    EXPECT_EQ(step.status, 0u) << describe_status(step.status);
  }

 private:
  Mirror mirror_;
};

class IntegrationTest : public GpuTest, public ::testing::WithParamInterface<KvLayout> {
 protected:
  HostTensor fetch(const DeviceBuffer& b, DType t, Shape shape) {
    HostTensor h(t, shape);
    ctx().download(b.view(0, h.bytes()), h.data(), h.bytes());
    return h;
  }

  // After a step: its requests and what it wrote.
  StepRecord read_back(const StepPlan& step, const StepBuffers& buf) {
    const int64_t T = int64_t(step.slots.size());
    StepRecord r{step.seqs, step.positions, step.query_starts, step.context_lens, {}, {}, {}, {}, 0};
    for (uint32_t l = 0; l < kLayers; ++l) {
      r.query[l] = fetch(buf.query[l], DType::f16, Shape{T, kHeads, kHeadSize});
      r.key[l] = fetch(buf.key[l], DType::f16, Shape{T, kKvHeads, kHeadSize});
      r.value[l] = fetch(buf.value[l], DType::f16, Shape{T, kKvHeads, kHeadSize});
      r.output[l] = fetch(buf.output[l], DType::f16, Shape{T, kHeads, kHeadSize});
    }
    ctx().download(buf.status.view(), &r.status, 4);
    return r;
  }

  // Reads the step back, remembers what it wrote and checks its attention.
  void remember_and_check(const StepPlan& step, const StepBuffers& buf, const std::string& label) {
    const StepRecord record = read_back(step, buf);
    checker_.remember(record);
    checker_.check(record, GetParam(), label);
  }

  StepChecker checker_;
};

std::vector<int32_t> tokens(int32_t first, int32_t count) {
  std::vector<int32_t> t(static_cast<size_t>(count));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The walk-through's three steps, each run by the step function it gives: `run(step)`, then read
// back and checked.
void three_steps(EngineCache& engine, Mirror& mirror, const std::function<void(const StepPlan&, const char*)>& run) {
  BlockManager& blocks = engine.blocks;
  const std::vector<int32_t> p1 = tokens(1000, 40), p2 = tokens(2000, 20);
  std::vector<int32_t> p4(p1.begin(), p1.begin() + 32);  // shares two blocks with p1
  for (int32_t t : tokens(4000, 10)) p4.push_back(t);

  // Step 1: two prompts, whole.
  StepPlan step1;
  ASSERT_EQ(admit(blocks, step1, 1, p1, 64), 40);
  ASSERT_EQ(admit(blocks, step1, 2, p2, 64), 20);
  run(step1, "step 1");

  // Step 2: sequence 1 forks into a second sample (3); both decode, the first append copying the
  // shared last block on write. Sequence 2 is preempted by swapping out. Prompt 4 finds its first
  // 32 tokens in the prefix cache and prefills the other 10.
  StepPlan step2;
  const uint64_t child = 3;
  fork_samples(blocks, 1, std::span(&child, 1));
  mirror[3] = mirror[1];
  add_decode(blocks, step2, 1, 7);
  add_decode(blocks, step2, 3, 9);
  ASSERT_EQ(step2.copies.size(), 1u) << "the shared last block (positions 32..39) is copied on write";
  ASSERT_EQ(preempt(blocks, step2, 2), Preempted::swapped);
  ASSERT_EQ(step2.swap_out.size(), 2u);
  ASSERT_EQ(admit(blocks, step2, 4, p4, 64), 10);
  EXPECT_EQ(step2.positions.back(), 41);
  mirror[4].assign(mirror[1].begin(), mirror[1].begin() + 32);
  run(step2, "step 2");

  // Step 3: sequence 2 back in (to other device blocks); everyone decodes.
  StepPlan step3;
  ASSERT_TRUE(resume(blocks, step3, 2));
  ASSERT_EQ(step3.swap_in.size(), 2u);
  for (const uint64_t seq : {1, 2, 3, 4}) add_decode(blocks, step3, seq, 11);
  run(step3, "step 3");
}

TEST_P(IntegrationTest, ThreeEngineStepsMatchTheReference) {
  EngineCache engine(ctx(), GetParam(), 16, 8);
  const EnginePlans plans(ctx(), engine.cache);
  StepBuffers buf(ctx(), plans.scratch_bytes());
  uint32_t seed = 1;
  const ProjectQkv random_qkv = [&](VkCommandBuffer cmd, uint32_t, const TensorView& q, const TensorView& k,
                                    const TensorView& v) {
    record_fill_random(ctx(), cmd, q, seed++);
    record_fill_random(ctx(), cmd, k, seed++);
    record_fill_random(ctx(), cmd, v, seed++);
  };
  three_steps(engine, checker_.mirror(), [&](const StepPlan& step, const char* label) {
    run_step(ctx(), engine.cache, plans, step, buf, random_qkv);
    remember_and_check(step, buf, label);
  });
}

// The same steps replayed (section 8): each bucket's layers recorded once, before any step; steps
// 1 and 2 (prompt chunks, then decode requests beside a chunk after a cached prefix) replay the
// mixed bucket's recording with other requests, tokens, lengths and block tables, step 3 the
// decode bucket's. The model's kernels were recorded once too: their random values repeat.
TEST_P(IntegrationTest, ReplayedStepsMatchTheReference) {
  EngineCache engine(ctx(), GetParam(), 16, 8);
  const EnginePlans plans(ctx(), engine.cache);
  StepBuffers buf(ctx(), plans.scratch_bytes());
  uint32_t seed = 1;
  const ProjectQkv random_qkv = [&](VkCommandBuffer cmd, uint32_t, const TensorView& q, const TensorView& k,
                                    const TensorView& v) {
    record_fill_random(ctx(), cmd, q, seed++);
    record_fill_random(ctx(), cmd, k, seed++);
    record_fill_random(ctx(), cmd, v, seed++);
  };
  ReplayedStep decode(ctx(), engine.cache, plans.decode, buf, random_qkv);
  ReplayedStep mixed(ctx(), engine.cache, plans.mixed, buf, random_qkv);
  const uint32_t recorded_seed = seed;
  three_steps(engine, checker_.mirror(), [&](const StepPlan& step, const char* label) {
    ReplayedStep& replay = &plans.for_step(step) == &plans.decode ? decode : mixed;
    replay.submit(engine.cache, step, buf);
    replay.wait();
    remember_and_check(step, buf, label);
  });
  EXPECT_EQ(seed, recorded_seed) << "the steps recorded nothing: they replayed";
}

INSTANTIATE_TEST_SUITE_P(Layouts, IntegrationTest, ::testing::Values(KvLayout::vllm, KvLayout::nhd, KvLayout::hnd),
                         [](const auto& info) { return std::string(kv_layout_name(info.param)); });

// ---- the same three steps in C (tests/docs/integration_step.c) ----

static_assert(ENGINE_LAYERS == kLayers && ENGINE_HEADS == kHeads && ENGINE_KV_HEADS == kKvHeads &&
              ENGINE_HEAD_SIZE == kHeadSize && ENGINE_BLOCK_SIZE == kBlockSize &&
              ENGINE_MAX_BLOCKS_PER_SEQ == kMaxBlocksPerSeq && ENGINE_MAX_REQUESTS == kMaxRequests &&
              ENGINE_MAX_STEP_TOKENS == kMaxStepTokens, "the C engine is the C++ section's model");

// The model's kernels, here: random queries, keys and values from a running seed.
struct RandomQkv {
  vkp_context* ctx;
  uint32_t seed;
};
vkp_status random_qkv(VkCommandBuffer cmd, uint32_t, const vkp_tensor_view* q, const vkp_tensor_view* k,
                      const vkp_tensor_view* v, void* user_data) {
  auto* r = static_cast<RandomQkv*>(user_data);
  for (const vkp_tensor_view* t : {q, k, v})
    if (const vkp_status s = vkp_record_fill_random(r->ctx, cmd, t, r->seed++); s != VKP_OK) return s;
  return VKP_OK;
}

class IntegrationCTest : public GpuTest, public ::testing::WithParamInterface<KvLayout> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    ctx_ = c_api_helpers::c_context();
    vkp_kv_cache_shape shape;
    vkp_kv_cache_shape_init(&shape);
    shape.num_layers = ENGINE_LAYERS;
    shape.num_kv_heads = ENGINE_KV_HEADS;
    shape.head_size = ENGINE_HEAD_SIZE;
    shape.block_size = ENGINE_BLOCK_SIZE;
    shape.dtype = VKP_DTYPE_F16;
    shape.layout = vkp_kv_layout(GetParam());
    vkp_kv_cache_options options;
    vkp_kv_cache_options_init(&options);
    options.num_blocks = 16;
    options.num_host_blocks = 8;
    ASSERT_VKP_OK(vkp_kv_cache_create(ctx_, &shape, &options, &cache_));
    vkp_block_manager_options manager_options;
    vkp_block_manager_options_init(&manager_options);
    manager_options.num_host_blocks = 8;
    ASSERT_VKP_OK(vkp_block_manager_create(16, ENGINE_BLOCK_SIZE, &manager_options, &blocks_));
    const vkp_status planned = engine_plans_create(ctx_, cache_, &plans_);
    EXPECT_VKP_OK(planned);
    ASSERT_EQ(planned, VKP_OK);
    const vkp_status made = engine_buffers_create(ctx_, plans_.scratch_bytes, &buf_);
    EXPECT_VKP_OK(made);
    ASSERT_EQ(made, VKP_OK);
  }
  void TearDown() override {
    engine_buffers_destroy(&buf_);
    engine_plans_destroy(&plans_);
    vkp_block_manager_destroy(blocks_);
    vkp_kv_cache_destroy(cache_);
    GpuTest::TearDown();
  }

  HostTensor fetch(const vkp_buffer* b, DType t, Shape shape) {
    HostTensor h(t, shape);
    const vkp_buffer_view view = vkp_buffer_view_of(b, 0, h.bytes());
    EXPECT_VKP_OK(vkp_download(ctx_, &view, h.data(), h.bytes()));
    return h;
  }

  // Runs the step through C, then reads it back, remembers what it wrote and checks its attention.
  void run_and_check(const engine_step& step, const std::string& label) {
    char error[256] = "";
    ASSERT_EQ(engine_run_step(ctx_, cache_, &plans_, &step, &buf_, random_qkv, &qkv_, error, sizeof(error)), VKP_OK)
        << error;
    const size_t S = step.num_requests, T = step.num_tokens;
    StepRecord r;
    r.seqs.assign(step.seqs, step.seqs + S);
    r.positions.assign(step.positions, step.positions + T);
    r.query_starts.assign(step.query_starts, step.query_starts + S + 1);
    r.context_lens.assign(step.context_lens, step.context_lens + S);
    const int64_t t = int64_t(T);
    for (uint32_t l = 0; l < kLayers; ++l) {
      r.query[l] = fetch(buf_.query[l], DType::f16, Shape{t, kHeads, kHeadSize});
      r.key[l] = fetch(buf_.key[l], DType::f16, Shape{t, kKvHeads, kHeadSize});
      r.value[l] = fetch(buf_.value[l], DType::f16, Shape{t, kKvHeads, kHeadSize});
      r.output[l] = fetch(buf_.output[l], DType::f16, Shape{t, kHeads, kHeadSize});
    }
    const vkp_buffer_view status = vkp_buffer_view_of(buf_.status, 0, 4);
    EXPECT_VKP_OK(vkp_download(ctx_, &status, &r.status, 4));
    checker_.remember(r);
    checker_.check(r, GetParam(), label);
  }

  vkp_context* ctx_ = nullptr;
  vkp_kv_cache* cache_ = nullptr;
  vkp_block_manager* blocks_ = nullptr;
  engine_plans plans_{};
  engine_buffers buf_{};
  RandomQkv qkv_{nullptr, 1};
  StepChecker checker_;
};

// The C++ walk-through's three steps, scheduled and recorded by the C code.
TEST_P(IntegrationCTest, ThreeEngineStepsInCMatchTheReference) {
  qkv_.ctx = ctx_;
  Mirror& mirror = checker_.mirror();
  const std::vector<int32_t> p1 = tokens(1000, 40), p2 = tokens(2000, 20);
  std::vector<int32_t> p4(p1.begin(), p1.begin() + 32);  // shares two blocks with p1
  for (int32_t t : tokens(4000, 10)) p4.push_back(t);
  int32_t prefill = 0;
  vkp_bool32 done = VKP_FALSE;

  // Step 1: two prompts, whole.
  auto step1 = std::make_unique<engine_step>();
  ASSERT_VKP_OK(step_add_prompt(blocks_, step1.get(), 1, p1.data(), 40, 64, &prefill));
  EXPECT_EQ(prefill, 40);
  ASSERT_VKP_OK(step_add_prompt(blocks_, step1.get(), 2, p2.data(), 20, 64, &prefill));
  EXPECT_EQ(prefill, 20);
  run_and_check(*step1, "step 1");

  // Step 2: sequence 1 forks (3); both decode, the first append copying the shared last block on
  // write; sequence 2 swapped out; prompt 4 finds 32 tokens in the prefix cache.
  auto step2 = std::make_unique<engine_step>();
  ASSERT_VKP_OK(vkp_block_manager_fork(blocks_, 1, 3));
  mirror[3] = mirror[1];
  ASSERT_VKP_OK(step_add_decode(blocks_, step2.get(), 1, 7));
  ASSERT_VKP_OK(step_add_decode(blocks_, step2.get(), 3, 9));
  ASSERT_EQ(step2->num_copies, 1u) << "the shared last block (positions 32..39) is copied on write";
  ASSERT_VKP_OK(step_preempt(blocks_, step2.get(), 2, &done));
  ASSERT_EQ(done, VKP_TRUE);
  ASSERT_EQ(step2->num_swap_out, 2u);
  ASSERT_VKP_OK(step_add_prompt(blocks_, step2.get(), 4, p4.data(), 42, 64, &prefill));
  EXPECT_EQ(prefill, 10);
  EXPECT_EQ(step2->positions[step2->num_tokens - 1], 41);
  mirror[4].assign(mirror[1].begin(), mirror[1].begin() + 32);
  run_and_check(*step2, "step 2");

  // Step 3: sequence 2 back in (to other device blocks); everyone decodes.
  auto step3 = std::make_unique<engine_step>();
  ASSERT_VKP_OK(step_resume(blocks_, step3.get(), 2, &done));
  ASSERT_EQ(done, VKP_TRUE);
  ASSERT_EQ(step3->num_swap_in, 2u);
  for (const uint64_t seq : {1, 2, 3, 4}) ASSERT_VKP_OK(step_add_decode(blocks_, step3.get(), seq, 11));
  run_and_check(*step3, "step 3");
}

// A refused call ends the C step with its status and message, nothing submitted; a step's arrays
// that are full refuse another request before the block manager changes.
TEST_P(IntegrationCTest, RefusalsEndTheStepWithTheirMessage) {
  qkv_.ctx = ctx_;
  auto step = std::make_unique<engine_step>();
  int32_t prefill = 0;
  const std::vector<int32_t> prompt = tokens(0, 5);
  ASSERT_VKP_OK(step_add_prompt(blocks_, step.get(), 1, prompt.data(), 5, 64, &prefill));
  engine_plans missing = plans_;
  missing.mixed = nullptr;  // a bucket never planned
  char error[256] = "";
  EXPECT_EQ(engine_run_step(ctx_, cache_, &missing, step.get(), &buf_, random_qkv, &qkv_, error, sizeof(error)),
            VKP_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(error), "vkp_attention_plan_shape_get: plan is NULL");
  EXPECT_EQ(qkv_.seed, 1u) << "nothing was recorded";

  // A failure inside the recording: the model's kernels refused (a view outside its buffer).
  const auto refuse = [](VkCommandBuffer, uint32_t, const vkp_tensor_view*, const vkp_tensor_view*,
                         const vkp_tensor_view*, void*) -> vkp_status { return VKP_ERROR_UNSUPPORTED; };
  EXPECT_EQ(engine_run_step(ctx_, cache_, &plans_, step.get(), &buf_, refuse, nullptr, error, sizeof(error)),
            VKP_ERROR_UNSUPPORTED);

  // Full: no room for a 17th request; the manager is left as it was.
  auto full = std::make_unique<engine_step>();
  full->num_requests = ENGINE_MAX_REQUESTS;
  int32_t len = 0;
  ASSERT_VKP_OK(vkp_block_manager_context_len(blocks_, 1, &len));
  EXPECT_EQ(step_add_decode(blocks_, full.get(), 1, 3), VKP_ERROR_OUT_OF_MEMORY);
  int32_t after = 0;
  ASSERT_VKP_OK(vkp_block_manager_context_len(blocks_, 1, &after));
  EXPECT_EQ(after, len);
}

INSTANTIATE_TEST_SUITE_P(Layouts, IntegrationCTest, ::testing::Values(KvLayout::vllm, KvLayout::nhd, KvLayout::hnd),
                         [](const auto& info) { return std::string(kv_layout_name(info.param)); });

class IntegrationDocTest : public GpuTest {};

// vLLM V1's cache [2, N, B, Hkv, D] used in place: 15 positions already there, 5 new ones written
// (rotated) and attended through the snippet's views.
TEST_F(IntegrationDocTest, EngineCacheUsedInPlace) {
  const int64_t N = 4, T = 5;
  const Shape pool{N, kBlockSize, kKvHeads, kHeadSize};
  DeviceBuffer kv = ctx().create_buffer(2 * size_t(pool.numel()) * 2);
  const LayerCacheViews layer = vllm_v1_layer(kv.handle(), 0, N, DType::f16);
  std::vector<DeviceBuffer> keep;
  auto make = [&](const HostTensor& h) {
    keep.push_back(ctx().create_buffer(std::max<size_t>(h.bytes(), 16)));
    ctx().upload(keep.back().view(), h.data(), h.bytes());
    return keep.back().tensor(h.dtype(), h.shape());
  };
  HostTensor slots(DType::i64, Shape{T}), positions(DType::i64, Shape{T}), table(DType::i32, Shape{1, 2});
  table.as<int32_t>()[0] = 2;  // positions 0..15 in block 2, 16..19 in block 0
  table.as<int32_t>()[1] = 0;
  for (int64_t j = 0; j < T; ++j) {
    positions.as<int64_t>()[j] = 15 + j;
    slots.as<int64_t>()[j] = j == 0 ? 2 * kBlockSize + 15 : (j - 1);
  }
  HostTensor lens(DType::i32, Shape{1}), starts(DType::i32, Shape{2});
  lens.as<int32_t>()[0] = 20;
  starts.as<int32_t>()[1] = int32_t(T);
  const TensorView query = keep.emplace_back(ctx().create_buffer(T * kHeads * kHeadSize * 2)).tensor(DType::f16, Shape{T, kHeads, kHeadSize});
  const TensorView key = keep.emplace_back(ctx().create_buffer(T * kKvHeads * kHeadSize * 2)).tensor(DType::f16, Shape{T, kKvHeads, kHeadSize});
  const TensorView value = keep.emplace_back(ctx().create_buffer(T * kKvHeads * kHeadSize * 2)).tensor(DType::f16, Shape{T, kKvHeads, kHeadSize});
  const TensorView output = keep.emplace_back(ctx().create_buffer(T * kHeads * kHeadSize * 2)).tensor(DType::f16, Shape{T, kHeads, kHeadSize});
  const HostTensor cos_sin_host = rotary_cos_sin_cache(32, kHeadSize);
  AttentionShape shape{.num_requests = 1, .num_query_tokens = uint32_t(T), .num_heads = kHeads,
                       .num_kv_heads = kKvHeads, .head_size = kHeadSize, .block_size = kBlockSize,
                       .num_blocks = uint32_t(N), .max_blocks_per_seq = 2, .query_dtype = DType::f16,
                       .cache_dtype = DType::f16, .kv_layout = KvLayout::nhd};
  const std::vector<int32_t> host_starts = {0, int32_t(T)};
  const AttentionPlan plan = AttentionPlan::create(ctx(), shape, host_starts);
  AttentionViews views;
  views.query = query;
  views.block_tables = make(table);
  views.context_lens = make(lens);
  views.query_starts = make(starts);
  views.output = output;
  if (plan.scratch_bytes() > 0) views.scratch = keep.emplace_back(ctx().create_buffer(plan.scratch_bytes())).view();
  const NewTokens tokens{key, value, make(slots), {}};
  const RotaryInputs rotary{query, make(positions), make(cos_sin_host)};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_fill_random(ctx(), cmd, kv.tensor(DType::f16, Shape{2 * pool.numel()}), 5);
    record_fill_random(ctx(), cmd, query, 6);
    record_fill_random(ctx(), cmd, key, 7);
    record_fill_random(ctx(), cmd, value, 8);
    barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kCompute, kShaderRW);
    record_layer(ctx(), cmd, layer, tokens, rotary, plan, views);
    barrier(cmd, kCompute, VK_ACCESS_SHADER_WRITE_BIT, kTransfer, VK_ACCESS_TRANSFER_READ_BIT);
  });
  AttentionInputs in;
  in.kv_layout = KvLayout::nhd;
  in.key_cache = HostTensor(DType::f16, pool);
  in.value_cache = HostTensor(DType::f16, pool);
  ctx().download(layer.key_cache.memory, in.key_cache.data(), in.key_cache.bytes());
  ctx().download(layer.value_cache.memory, in.value_cache.data(), in.value_cache.bytes());
  in.query = HostTensor(DType::f16, query.shape);
  ctx().download(query.memory, in.query.data(), in.query.bytes());
  in.block_tables = table;
  in.context_lens = lens;
  in.query_starts = starts;
  // The new tokens' slots hold their keys as rotated, and their values.
  HostTensor rotated_key(DType::f16, key.shape), new_value(DType::f16, value.shape);
  ctx().download(key.memory, rotated_key.data(), rotated_key.bytes());
  ctx().download(value.memory, new_value.data(), new_value.bytes());
  for (int64_t j = 0; j < T; ++j) {
    const int64_t slot = slots.as<int64_t>()[j], row = int64_t(kKvHeads) * kHeadSize;
    for (int64_t i = 0; i < row; ++i) {
      EXPECT_EQ(in.key_cache.get(size_t(slot * row + i)), rotated_key.get(size_t(j * row + i))) << j;
      EXPECT_EQ(in.value_cache.get(size_t(slot * row + i)), new_value.get(size_t(j * row + i))) << j;
    }
  }
  HostTensor got(DType::f16, output.shape);
  ctx().download(output.memory, got.data(), got.bytes());
  EXPECT_LE(max_abs_diff(got, reference::batch_attention(in).output), tolerance(DType::f16, DType::f16));
}

// Start-up builds every pipeline the steps use: a step after it builds none (the context's
// registry does not grow). Its cache loads into the next run's context; a damaged one is refused,
// and that context builds its pipelines afresh.
TEST(IntegrationStartUpTest, StartUpBuildsWhatTheStepsUseAndItsCacheLoadsNextTime) {
  ContextOptions options;
  options.validation = validation_wanted();
  auto registry = [](Context& ctx) {
    std::lock_guard lock(ctx.impl().pipeline_mutex);
    return ctx.impl().pipelines.size();
  };
  std::vector<uint8_t> saved;
  {
    Context ctx(options);
    EngineCache engine(ctx, KvLayout::vllm, 16, 0);
    std::string refused;
    saved = start_up(ctx, engine.cache, {}, refused);
    EXPECT_EQ(refused, "");
    // The model's kernels stand in as record_fill_random, which is no part of the step's set:
    // its pipeline is built before counting.
    const DeviceBuffer model = ctx.create_buffer(16);
    ctx.run_and_wait([&](VkCommandBuffer cmd) { record_fill_random(ctx, cmd, model.tensor(DType::f32, Shape{4}), 1); });
    const size_t built = registry(ctx);
    const EnginePlans plans(ctx, engine.cache);
    StepBuffers buf(ctx, plans.scratch_bytes());
    StepPlan step;
    ASSERT_EQ(admit(engine.blocks, step, 1, tokens(0, 20), 64), 20);
    uint32_t seed = 1;
    run_step(ctx, engine.cache, plans, step, buf, [&](VkCommandBuffer cmd, uint32_t, const TensorView& q,
                                                      const TensorView& k, const TensorView& v) {
      for (const TensorView* t : {&q, &k, &v}) record_fill_random(ctx, cmd, *t, seed++);
    });
    EXPECT_EQ(registry(ctx), built) << "the plans and the step found every pipeline built";
    EXPECT_EQ(ctx.validation_message_count(), 0u);
  }
  Context next(options);
  EngineCache engine(next, KvLayout::vllm, 16, 0);
  std::string refused;
  EXPECT_FALSE(start_up(next, engine.cache, saved, refused).empty());
  EXPECT_EQ(refused, "");
  std::vector<uint8_t> damaged(saved.begin(), saved.begin() + 20);
  start_up(next, engine.cache, damaged, refused);
  EXPECT_EQ(refused, "pipeline_cache: 20 bytes are fewer than the 32 of a VkPipelineCacheHeaderVersionOne (not a "
                     "pipeline cache, or a truncated one)");
}

// A refused call names what it refused and leaves the command buffer usable; the log callback
// receives the engine's lines until it is replaced.
TEST_F(IntegrationDocTest, RefusalsAndTheLog) {
  EngineCache engine(ctx(), KvLayout::vllm, 8, 0);
  StepPlan step;
  ASSERT_EQ(admit(engine.blocks, step, 1, tokens(0, 5), 64), 5);
  const EnginePlans plans(ctx(), engine.cache);
  const AttentionPlan& plan = plans.for_step(step);
  AttentionViews views;
  std::string refused;
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    refused = try_record_attention(engine.cache, cmd, kLayers, plan, views);
    record_fill_random(ctx(), cmd, engine.cache.key_cache(0), 1);  // the command buffer goes on
  });
  EXPECT_NE(refused.find("invalid_argument"), std::string::npos) << refused;
  EXPECT_NE(refused.find("layer 2 is outside [0, 2)"), std::string::npos) << refused;
  EXPECT_EQ(describe_status(kStatusBadSlot | kStatusBadPosition),
            "a slot >= N * B; a position outside the cos/sin cache; ");

  std::vector<std::string> lines;
  install_log(lines);
  engine_log(LogLevel::error, "seen", &lines);  // as vkpaged calls it
  set_log_callback(nullptr, nullptr);           // back to the default (stderr)
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "error: seen");
}


// One MLA layer of a decode step through the snippet (three requests, their blocks shuffled, the
// earlier rows random, 16 heads), against the CPU reference: q_pe rotated in place, the new rows
// written with k_pe rotated (bit for bit), the attention's latent output; with the plan the device
// chooses and with a split one, whose scratch the layer passes on (an H100 chose a split where
// lavapipe did not, and the snippet passed none).
TEST_F(IntegrationDocTest, MlaLayerMatchesTheReference) {
  const uint32_t H = 16, N = 3 * kMaxBlocksPerSeq;
  const int64_t M = kMaxBlocksPerSeq, B = kBlockSize;
  const KvCache cache = make_mla_cache(ctx(), N);
  std::mt19937 rng(39);
  std::vector<int32_t> ids(N);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  StepPlan step;
  const std::vector<int32_t> lens{37, 16, int32_t(kMaxPosition)};  // ragged, one whole block, the longest
  for (size_t r = 0; r < lens.size(); ++r) {
    const int32_t p = lens[r] - 1;  // the new token's position
    const int32_t* table = &ids[r * size_t(M)];
    step.seqs.push_back(r);
    step.block_tables.insert(step.block_tables.end(), table, table + M);
    step.slots.push_back(int64_t(table[p / B]) * B + p % B);
    step.positions.push_back(p);
    step.context_lens.push_back(lens[r]);
    step.query_starts.push_back(int32_t(r + 1));
  }
  const int64_t T = int64_t(step.slots.size());

  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random = [&](Shape shape) {
    HostTensor t(DType::bf16, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(size_t(i), uniform(rng));
    return t;
  };
  auto host = [](DType dtype, Shape shape, const auto& values) {
    HostTensor t(dtype, shape);
    for (size_t i = 0; i < values.size(); ++i) t.set(i, double(values[i]));
    return t;
  };
  const HostTensor query = random(Shape{T, H, kMlaRow});
  const HostTensor kv_c = random(Shape{T, kLatent}), k_pe = random(Shape{T, kRope});
  const HostTensor pool = random(Shape{N, B, kMlaRow});  // what earlier steps wrote
  const HostTensor cos_sin = rotary_cos_sin_cache(kMaxPosition, kRope, 10000.0);
  const HostTensor slots = host(DType::i64, Shape{T}, step.slots), positions = host(DType::i64, Shape{T}, step.positions);
  const HostTensor tables = host(DType::i32, Shape{T, M}, step.block_tables);
  const HostTensor lens_t = host(DType::i32, Shape{T}, step.context_lens);
  const HostTensor starts = host(DType::i32, Shape{T + 1}, step.query_starts);
  const float scale = deepseek_softmax_scale();
  EXPECT_NEAR(scale, 0.1352, 1e-4);

  // The reference: q_pe rotated, the rows written (k_pe rotated), then the attention.
  HostTensor rotated = query, q_pe(DType::bf16, Shape{T, H, kRope}), no_key;
  for (int64_t i = 0; i < T * H; ++i)
    for (int64_t d = 0; d < kRope; ++d) q_pe.set(size_t(i * kRope + d), query.get(size_t(i * kMlaRow + kLatent + d)));
  reference::rotary_embedding(q_pe, no_key, positions, cos_sin, RotaryStyle::gptj);
  for (int64_t i = 0; i < T * H; ++i)
    for (int64_t d = 0; d < kRope; ++d) rotated.set(size_t(i * kMlaRow + kLatent + d), q_pe.get(size_t(i * kRope + d)));
  reference::MlaHostCache want_cache{.mla_cache = pool};
  const reference::MlaHostRope rope{positions, cos_sin, RotaryStyle::gptj};
  reference::mla_reshape_and_cache(kv_c, k_pe, slots, want_cache, 1.0f, &rope);
  const MlaInputs in{.query = rotated, .mla_cache = want_cache.mla_cache, .value_head_size = kLatent,
                     .block_tables = tables, .context_lens = lens_t, .query_starts = starts, .cache_dtype = DType::bf16};
  const HostTensor want = reference::mla_attention(in, {.scale = scale}).output;
  EXPECT_GT(reference::absmax(want), 0.01f);

  // The plan the device chooses, and a split one (every device, whatever it chooses: the scratch
  // the layer passes on).
  MlaOptions split;
  split.split = SplitMode::split;
  split.partition_tokens = 64;
  for (const MlaOptions& options : {MlaOptions{}, split}) {
    const MlaPlan plan = plan_mla_step(ctx(), cache, H, step, options);
    SCOPED_TRACE(plan.describe());
    if (options.split == SplitMode::split) EXPECT_GT(plan.scratch_bytes(), 0u);
    std::vector<DeviceBuffer> keep;
    auto make = [&](const HostTensor& h) {
      keep.push_back(ctx().create_buffer(std::max<size_t>(h.bytes(), 16)));
      ctx().upload(keep.back().view(), h.data(), h.bytes());
      return keep.back().tensor(h.dtype(), h.shape());
    };
    const TensorView device_pool = cache.mla_cache(0).mla_cache;
    ctx().upload(device_pool.memory, pool.data(), pool.bytes());
    MlaLayerViews v{.query = make(query), .kv_c = make(kv_c), .k_pe = make(k_pe), .slots = make(slots),
                    .positions = make(positions), .cos_sin = make(cos_sin), .block_tables = make(tables),
                    .context_lens = make(lens_t), .query_starts = make(starts),
                    .output = make(HostTensor(DType::bf16, Shape{T, H, kLatent}))};
    if (plan.scratch_bytes() > 0) {
      keep.push_back(ctx().create_buffer(plan.scratch_bytes()));
      v.scratch = keep.back().view();
    }
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_mla_layer(ctx(), cmd, cache, 0, plan, v, scale); });

    HostTensor got_query(DType::bf16, query.shape()), got_pool(DType::bf16, pool.shape()), got(DType::bf16, want.shape());
    ctx().download(v.query.memory, got_query.data(), got_query.bytes());
    ctx().download(device_pool.memory, got_pool.data(), got_pool.bytes());
    ctx().download(v.output.memory, got.data(), got.bytes());
    EXPECT_LE(max_abs_diff(got_query, rotated), 1.0 / 128) << "q_pe rotated (bf16: one unit in the last place)";
    EXPECT_EQ(std::memcmp(got_pool.data(), want_cache.mla_cache.data(), got_pool.bytes()), 0) << "the rows written";
    EXPECT_LE(max_abs_diff(got, want), tolerance(DType::bf16, DType::bf16));
  }
}

}  // namespace
}  // namespace vkpaged::test
