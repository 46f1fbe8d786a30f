// SPDX-License-Identifier: Apache-2.0
// One Context shared by several threads, as the thread rules in context.hpp allow: each thread
// creates its own plans (some shapes shared between threads, so pipeline creation races with
// lookups), records decode into command buffers of its own VkCommandPool, and submits (the
// queue itself is externally synchronized: submits go through one mutex). A second test runs
// the convenience path (upload, run_and_wait, download) from several threads at once.
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr int kThreads = 4;
constexpr int kRoundsPerThread = 3;

// Head sizes no other test uses, so that the pipelines are created here, concurrently; threads
// 0 and 2 share a shape.
DecodeCase case_for_thread(int thread, int round) {
  DecodeCase c;
  c.head_size = (thread % 2 == 0) ? 40 : 56 + 16 * uint32_t(thread / 2);
  c.heads = 4;
  c.kv_heads = thread == 3 ? 4 : 2;
  c.block_size = 8;
  c.lens = {uint32_t(1 + 13 * round), 29, uint32_t(70 + thread)};
  c.query_dtype = thread == 1 ? DType::f32 : DType::f16;
  c.cache_dtype = c.query_dtype;
  c.sinks = round == 1;
  return c;
}

// A host-visible device buffer holding `host`: the engine-style path with no staging copy.
struct MappedTensor {
  DeviceBuffer buffer;
  TensorView view;
};
MappedTensor mapped(Context& ctx, const HostTensor& host, DType dtype) {
  MappedTensor m;
  m.buffer = ctx.create_buffer(std::max<size_t>(host.bytes(), 16), MemoryKind::host_visible);
  std::memcpy(m.buffer.mapped(), host.data(), host.bytes());
  m.view = m.buffer.tensor(dtype, host.shape());
  return m;
}

// What one thread owns: a command pool (pools are externally synchronized, so one per thread).
class ThreadCommands {
 public:
  explicit ThreadCommands(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    info.queueFamilyIndex = ctx.queue_family();
    EXPECT_EQ(vkCreateCommandPool(ctx.device(), &info, nullptr, &pool_), VK_SUCCESS);
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    EXPECT_EQ(vkAllocateCommandBuffers(ctx.device(), &alloc, &cmd_), VK_SUCCESS);
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    EXPECT_EQ(vkCreateFence(ctx.device(), &fence, nullptr, &fence_), VK_SUCCESS);
  }
  ~ThreadCommands() {
    vkDestroyFence(ctx_.device(), fence_, nullptr);
    vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
  }
  ThreadCommands(const ThreadCommands&) = delete;
  ThreadCommands& operator=(const ThreadCommands&) = delete;

  // Records decode, then a compute -> host barrier for the mapped output; submits and waits.
  void decode(const DecodePlan& plan, const DecodeViews& views, std::mutex& queue_mutex) {
    vkResetCommandBuffer(cmd_, 0);
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cmd_, &begin);
    record_decode(ctx_, cmd_, plan, views);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0,
                         nullptr, 0, nullptr);
    vkEndCommandBuffer(cmd_);
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd_;
    vkResetFences(ctx_.device(), 1, &fence_);
    {
      std::lock_guard lock(queue_mutex);
      EXPECT_EQ(vkQueueSubmit(ctx_.queue(), 1, &submit, fence_), VK_SUCCESS);
    }
    EXPECT_EQ(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), VK_SUCCESS);
  }

 private:
  Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// The worst |gpu - reference| of one thread's round, NaN on any failure.
double decode_on_own_commands(Context& ctx, ThreadCommands& commands, std::mutex& queue_mutex, int thread, int round) {
  const DecodeCase c = case_for_thread(thread, round);
  std::mt19937 rng(uint32_t(100 * thread + round));
  const DecodeInputs in = make_decode_inputs(c, rng);
  const DecodeOptions options{};
  const DecodePlan plan = DecodePlan::create(ctx, decode_shape_of(in), options);

  const MappedTensor q = mapped(ctx, in.query, in.query.dtype());
  const MappedTensor k = mapped(ctx, in.key_cache, in.key_cache.dtype());
  const MappedTensor v = mapped(ctx, in.value_cache, in.value_cache.dtype());
  const MappedTensor bt = mapped(ctx, in.block_tables, DType::i32);
  const MappedTensor cl = mapped(ctx, in.context_lens, DType::i32);
  const MappedTensor out = mapped(ctx, HostTensor(in.query.dtype(), in.query.shape()), in.query.dtype());
  MappedTensor sinks, scratch;
  DecodeViews views;
  views.query = q.view;
  views.key_cache = k.view;
  views.value_cache = v.view;
  views.block_tables = bt.view;
  views.context_lens = cl.view;
  views.output = out.view;
  if (c.sinks) views.sinks = (sinks = mapped(ctx, in.sinks, DType::f32)).view;
  if (plan.scratch_bytes()) {
    scratch = mapped(ctx, HostTensor(DType::u8, Shape{int64_t(plan.scratch_bytes())}), DType::u8);
    views.scratch = scratch.view.memory;
  }
  commands.decode(plan, views, queue_mutex);

  HostTensor got(in.query.dtype(), in.query.shape());
  std::memcpy(got.data(), out.buffer.mapped(), got.bytes());
  const double err = max_abs_diff(got, reference::decode_attention(in, options).output);
  return err <= tolerance(c.query_dtype, c.cache_dtype) ? err : std::numeric_limits<double>::quiet_NaN();
}

class ThreadTest : public GpuTest {};

TEST_F(ThreadTest, ThreadsRecordDecodeIntoTheirOwnCommandBuffers) {
  std::mutex queue_mutex;
  std::vector<std::vector<double>> errors(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        ThreadCommands commands(ctx());
        for (int r = 0; r < kRoundsPerThread; ++r)
          errors[size_t(t)].push_back(decode_on_own_commands(ctx(), commands, queue_mutex, t, r));
      } catch (const std::exception& e) {
        failures[size_t(t)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[size_t(t)], "") << "thread " << t;
    ASSERT_EQ(errors[size_t(t)].size(), size_t(kRoundsPerThread)) << "thread " << t;
    for (int r = 0; r < kRoundsPerThread; ++r)
      EXPECT_FALSE(std::isnan(errors[size_t(t)][size_t(r)])) << "thread " << t << " round " << r << ": "
                                                             << case_for_thread(t, r).str();
  }
}

// upload, run_and_wait and download lock the Context's queue: several threads may call them.
TEST_F(ThreadTest, ThreadsShareTheConvenienceCalls) {
  std::vector<double> errors(kThreads, -1.0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const DecodeCase c = case_for_thread(t, 2);
        std::mt19937 rng(uint32_t(7 + t));
        const DecodeInputs in = make_decode_inputs(c, rng);
        const DecodeOptions options{};
        const double err = max_abs_diff(decode_attention(ctx(), in, options).output,
                                        reference::decode_attention(in, options).output);
        errors[size_t(t)] = err <= tolerance(c.query_dtype, c.cache_dtype) ? err : std::nan("");
      } catch (const std::exception&) {
        errors[size_t(t)] = std::nan("");
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_GE(errors[size_t(t)], 0.0) << "thread " << t;
}

}  // namespace
}  // namespace vkpaged::test
