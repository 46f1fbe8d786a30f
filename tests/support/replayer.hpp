// SPDX-License-Identifier: Apache-2.0
#pragma once
// The engine's side of the replay contract (docs/integration.md, "Replaying a recorded step"):
// one command buffer recorded once and submitted again for every step.
#include <gtest/gtest.h>
#include <vulkan/vulkan.h>

#include <functional>

#include "vkpaged/context.hpp"

namespace vkpaged::test {

// The engine's side: one command buffer, recorded once, submitted and waited for per step.
class Replayer {
 public:
  explicit Replayer(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo pinfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pinfo.queueFamilyIndex = ctx.queue_family();
    EXPECT_EQ(vkCreateCommandPool(ctx.device(), &pinfo, nullptr, &pool_), VK_SUCCESS);
    VkCommandBufferAllocateInfo ainfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ainfo.commandPool = pool_;
    ainfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ainfo.commandBufferCount = 1;
    EXPECT_EQ(vkAllocateCommandBuffers(ctx.device(), &ainfo, &cmd_), VK_SUCCESS);
    VkFenceCreateInfo finfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    EXPECT_EQ(vkCreateFence(ctx.device(), &finfo, nullptr, &fence_), VK_SUCCESS);
  }
  ~Replayer() {
    vkQueueWaitIdle(ctx_.queue());
    vkDestroyFence(ctx_.device(), fence_, nullptr);
    vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
  }
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  // Records the step once (no ONE_TIME_SUBMIT: it is submitted again). The previous replay's
  // writes come before this one's reads and writes; the outputs go to the host after.
  void record(const std::function<void(VkCommandBuffer)>& step) {
    VkCommandBufferBeginInfo binfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    ASSERT_EQ(vkBeginCommandBuffer(cmd_, &binfo), VK_SUCCESS);
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    step(cmd_);
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    ASSERT_EQ(vkEndCommandBuffer(cmd_), VK_SUCCESS);
  }

  void replay() {
    VkSubmitInfo sinfo{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    sinfo.commandBufferCount = 1;
    sinfo.pCommandBuffers = &cmd_;
    ASSERT_EQ(vkResetFences(ctx_.device(), 1, &fence_), VK_SUCCESS);
    ASSERT_EQ(vkQueueSubmit(ctx_.queue(), 1, &sinfo, fence_), VK_SUCCESS);
    ASSERT_EQ(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, 60'000'000'000ull), VK_SUCCESS);
  }

 private:
  void barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    const VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, src_access, dst_access};
    vkCmdPipelineBarrier(cmd_, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
  }

  Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace vkpaged::test
