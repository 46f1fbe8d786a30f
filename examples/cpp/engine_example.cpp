// SPDX-License-Identifier: Apache-2.0
// vkpaged inside an engine that owns its Vulkan device: the engine creates its instance,
// device, buffers and command buffer itself, adopts them into a vkpaged::Context, and for one
// decode step records reshape_and_cache (the step's new keys and values into the paged cache)
// and decode attention into its own command buffer, with its own barriers, and submits it to
// its own queue. The CPU reference checks the result. Prints one line; exits non-zero on any
// error or mismatch.
#include <vkpaged/block_manager.hpp>
#include <vkpaged/cache_ops.hpp>
#include <vkpaged/decode.hpp>
#include <vkpaged/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine_vulkan.hpp"

namespace {

constexpr int64_t S = 4, H = 8, Hkv = 2, D = 128, B = 16, N = 64;
constexpr vkpaged::DType kDtype = vkpaged::DType::f16;

vkpaged::HostTensor random_tensor(vkpaged::Shape shape, std::mt19937& rng) {
  vkpaged::HostTensor t(kDtype, shape);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(size_t(i), uniform(rng));
  return t;
}

// The engine's buffer holding a host tensor, and vkpaged's view of it.
struct EngineTensor {
  std::unique_ptr<EngineBuffer> buffer;
  vkpaged::TensorView view;
};
EngineTensor engine_tensor(const EngineDevice& device, const vkpaged::HostTensor& host) {
  EngineTensor t;
  t.buffer = std::make_unique<EngineBuffer>(device, std::max<size_t>(host.bytes(), 16));
  std::memcpy(t.buffer->mapped, host.data(), host.bytes());
  t.view = {{t.buffer->buffer, 0, host.bytes()}, host.dtype(), host.shape()};
  return t;
}

// Makes the writes of `src_stage` visible to the reads of `dst_stage` (here: compute shader
// writes to the compute shader that follows, and to the host after the fence).
void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  b.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}

int run() {
  // The engine's device: the one vkpaged's default choice names, opened by the engine itself.
  EngineDevice engine(vkpaged::list_devices().default_index);
  vkpaged::ExternalDevice external;
  external.instance = engine.instance;
  external.physical_device = engine.physical_device;
  external.device = engine.device;
  external.queue_family = engine.queue_family;
  vkpaged::Context ctx(external);

  // The scheduler's side: prompts already in the cache, and one new token per sequence.
  const std::vector<int32_t> prompt_lens = {1, 15, 16, 300};
  vkpaged::BlockManager manager{int32_t(N), int32_t(B)};
  std::vector<uint64_t> ids;
  vkpaged::HostTensor slots(vkpaged::DType::i64, vkpaged::Shape{S});
  for (int64_t s = 0; s < S; ++s) {
    ids.push_back(uint64_t(s));
    std::vector<int32_t> prompt(size_t(prompt_lens[size_t(s)]));
    for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = int32_t(1000 * s + int64_t(t));
    manager.add_sequence(ids.back(), prompt);
    slots.as<int64_t>()[s] = manager.append_token(ids.back(), 7).slot;  // no fork: never a copy
  }
  const int64_t M = (*std::max_element(prompt_lens.begin(), prompt_lens.end()) + 1 + B - 1) / B;
  const vkpaged::BatchArrays batch = manager.build_batch(ids, int32_t(M));

  std::mt19937 rng(2024);
  const vkpaged::HostTensor query = random_tensor(vkpaged::Shape{S, H, D}, rng);
  const vkpaged::HostTensor new_keys = random_tensor(vkpaged::Shape{S, Hkv, D}, rng);
  const vkpaged::HostTensor new_values = random_tensor(vkpaged::Shape{S, Hkv, D}, rng);
  const int64_t x = vkpaged::cache_pack_factor(kDtype);
  vkpaged::HostTensor key_cache = random_tensor(vkpaged::Shape{N, Hkv, D / x, B, x}, rng);
  vkpaged::HostTensor value_cache = random_tensor(vkpaged::Shape{N, Hkv, D, B}, rng);
  vkpaged::HostTensor tables(vkpaged::DType::i32, vkpaged::Shape{S, M});
  vkpaged::HostTensor lens(vkpaged::DType::i32, vkpaged::Shape{S});
  std::memcpy(tables.data(), batch.block_tables.data(), tables.bytes());
  std::memcpy(lens.data(), batch.context_lens.data(), lens.bytes());

  // Once per batch shape: the plan.
  vkpaged::DecodeShape shape;
  shape.num_seqs = S;
  shape.num_heads = H;
  shape.num_kv_heads = Hkv;
  shape.head_size = D;
  shape.block_size = B;
  shape.num_blocks = N;
  shape.max_blocks_per_seq = uint32_t(M);
  shape.max_context_len = uint32_t(*std::max_element(batch.context_lens.begin(), batch.context_lens.end()));
  shape.query_dtype = shape.cache_dtype = kDtype;
  const vkpaged::DecodePlan plan = vkpaged::DecodePlan::create(ctx, shape);

  // The engine's buffers; vkpaged only sees views of them.
  const EngineTensor d_query = engine_tensor(engine, query), d_keys = engine_tensor(engine, new_keys);
  const EngineTensor d_values = engine_tensor(engine, new_values), d_slots = engine_tensor(engine, slots);
  const EngineTensor d_key_cache = engine_tensor(engine, key_cache), d_value_cache = engine_tensor(engine, value_cache);
  const EngineTensor d_tables = engine_tensor(engine, tables), d_lens = engine_tensor(engine, lens);
  const EngineTensor d_output = engine_tensor(engine, vkpaged::HostTensor(kDtype, query.shape()));
  std::unique_ptr<EngineBuffer> scratch;
  if (plan.scratch_bytes()) scratch = std::make_unique<EngineBuffer>(engine, plan.scratch_bytes());

  // One step, recorded into the engine's command buffer.
  EngineCommands commands(engine);
  VkCommandBuffer cmd = commands.begin();
  vkpaged::ReshapeAndCacheViews write{d_keys.view, d_values.view, d_slots.view, d_key_cache.view, d_value_cache.view, {}};
  vkpaged::record_reshape_and_cache(ctx, cmd, write);
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
  vkpaged::DecodeViews views;
  views.query = d_query.view;
  views.key_cache = d_key_cache.view;
  views.value_cache = d_value_cache.view;
  views.block_tables = d_tables.view;
  views.context_lens = d_lens.view;
  views.output = d_output.view;
  if (scratch) views.scratch = {scratch->buffer, 0, scratch->size};
  // Per call: the logit scale (here the default, 1/sqrt(D)), a soft cap, fp8 scales.
  const vkpaged::DecodeParams params;
  vkpaged::record_decode(ctx, cmd, plan, views, params);
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  commands.submit_and_wait();

  // The same step on the CPU.
  vkpaged::reference::reshape_and_cache(new_keys, new_values, slots, key_cache, value_cache);
  vkpaged::DecodeInputs inputs;
  inputs.query = query;
  inputs.key_cache = key_cache;
  inputs.value_cache = value_cache;
  inputs.block_tables = tables;
  inputs.context_lens = lens;
  inputs.cache_dtype = kDtype;
  const vkpaged::HostTensor want = vkpaged::reference::decode_attention(inputs, {}, params).output;

  double worst = 0.0;
  bool ok = true;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double diff = std::fabs(double(vkpaged::load_element(d_output.buffer->mapped, kDtype, size_t(i))) - want.get(size_t(i)));
    ok = ok && diff <= 3e-3;  // the contract's f16 tolerance; a NaN fails too
    worst = std::max(worst, diff);
  }
  std::printf(
      "vkpaged C++ example: engine-owned device %s, reshape_and_cache + decode of %lld sequences recorded into the "
      "engine's command buffer (%s): max |gpu - reference| = %.2e -> %s\n",
      engine.name.c_str(), (long long)S, plan.describe().c_str(), worst, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkpaged C++ example: %s\n", e.what());
    return 1;
  }
}
