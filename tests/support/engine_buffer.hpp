// SPDX-License-Identifier: Apache-2.0
#pragma once
// A small buffer that vkpaged did not make (an engine's), for views that claim more bytes than
// it has: vkpaged refuses views past the end of its own buffers first, but an engine buffer's
// size is not vkpaged's to know, so such views reach the operators' own limits (the refusals
// that come before anything is recorded; the views are never used).
#include <gtest/gtest.h>
#include <vulkan/vulkan.h>

#include "vk/context_impl.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::test {

struct EngineBuffer {
  vk::UniqueMemory memory;  // declared first: the buffer goes before its memory
  vk::UniqueBuffer buffer;

  // `bytes` of device memory, with a device address where the context has them.
  EngineBuffer(Context& ctx, VkDeviceSize bytes) {
    const auto& impl = ctx.impl();
    const auto& d = impl.d;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (impl.buffer_device_address) info.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    VkBuffer raw = VK_NULL_HANDLE;
    EXPECT_EQ(d.vkCreateBuffer(ctx.device(), &info, nullptr, &raw), VK_SUCCESS);
    buffer = vk::UniqueBuffer(&d, ctx.device(), raw);
    VkMemoryRequirements req{};
    d.vkGetBufferMemoryRequirements(ctx.device(), raw, &req);
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    if (impl.buffer_device_address) alloc.pNext = &flags;
    alloc.allocationSize = req.size;
    while (!(req.memoryTypeBits & (1u << alloc.memoryTypeIndex))) ++alloc.memoryTypeIndex;
    VkDeviceMemory raw_memory = VK_NULL_HANDLE;
    EXPECT_EQ(d.vkAllocateMemory(ctx.device(), &alloc, nullptr, &raw_memory), VK_SUCCESS);
    memory = vk::UniqueMemory(&d, ctx.device(), raw_memory);
    EXPECT_EQ(d.vkBindBufferMemory(ctx.device(), raw, raw_memory, 0), VK_SUCCESS);
  }

  VkBuffer get() const { return buffer.get(); }
};

}  // namespace vkpaged::test
