// SPDX-License-Identifier: Apache-2.0
// Views of buffers vkpaged created must lie inside them (issue 30: a 1 MiB view of a 256-byte
// buffer, uploaded to, corrupted the heap). The library knows the size of every buffer it made:
// DeviceBuffer refuses to make such a view, and upload, download and every operator refuse one
// made by hand, before anything is copied or recorded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vk/buffer_registry.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

class BufferBoundsTest : public GpuTest {};

TEST_F(BufferBoundsTest, ViewsPastTheEndAreNotMade) {
  const DeviceBuffer buffer = ctx().create_buffer(256, MemoryKind::host_visible);
  expect_refused([&] { buffer.view(0, size_t(1) << 20); }, "view: 1048576 bytes at offset 0 lie outside the buffer's 256 bytes");
  expect_refused([&] { buffer.view(257, 0); }, "at offset 257");
  expect_refused([&] { buffer.view(SIZE_MAX, 2); }, "lie outside the buffer's 256 bytes");
  expect_refused([&] { buffer.tensor(DType::f32, Shape{65}); }, "tensor: f32 [65] (260 bytes) at offset 0 lies outside");
  expect_refused([&] { buffer.tensor(DType::f16, Shape{8}, 250); }, "at offset 250");
  expect_refused([&] { buffer.tensor(DType::f32, Shape{int64_t(1) << 62}); }, "tensor: shape [4611686018427387904] of f32 is too large");
  EXPECT_EQ(buffer.view(128, 128).size, 128u);
  EXPECT_EQ(buffer.view(256, 0).size, 0u);
  EXPECT_EQ(buffer.tensor(DType::f32, Shape{64}).memory.size, 256u);
}

TEST_F(BufferBoundsTest, UploadAndDownloadRefuseViewsOutsideTheBuffer) {
  const DeviceBuffer buffer = ctx().create_buffer(256, MemoryKind::host_visible);
  std::memset(buffer.mapped(), 0, 256);
  std::vector<uint8_t> bytes(8192, 0x5A);
  const BufferView past{buffer.handle(), 0, size_t(1) << 20};
  expect_refused([&] { ctx().upload(past, bytes.data(), 8192); },
                 "upload: dst: a view of 1048576 bytes at offset 0 lies outside its buffer of 256 bytes");
  expect_refused([&] { ctx().download(past, bytes.data(), 8192); }, "download: src: a view of 1048576 bytes");
  const BufferView shifted{buffer.handle(), 192, 128};
  expect_refused([&] { ctx().upload(shifted, bytes.data(), 100); }, "at offset 192 lies outside its buffer of 256 bytes");
  expect_refused([&] { ctx().upload(BufferView{}, bytes.data(), 4); }, "upload: dst: no buffer given");
  EXPECT_EQ(static_cast<const uint8_t*>(buffer.mapped())[255], 0) << "a refused upload wrote";
  EXPECT_EQ(bytes[0], 0x5A) << "a refused download wrote";
  // Inside, both work.
  ctx().upload(buffer.view(192, 64), bytes.data(), 64);
  EXPECT_EQ(static_cast<const uint8_t*>(buffer.mapped())[255], 0x5A);
}

TEST_F(BufferBoundsTest, OperatorsRefuseViewsOutsideTheBuffer) {
  const DeviceBuffer buffer = ctx().create_buffer(256);
  TensorView big;
  big.dtype = DType::f32;
  big.shape = Shape{1024};
  big.memory = {buffer.handle(), 0, 4096};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_fill_random(ctx(), cmd, big, 1); }, "a view of 4096 bytes at offset 0 lies outside");
    const TensorView four = buffer.tensor(DType::f32, Shape{4});
    expect_refused([&] { record_absmax(ctx(), cmd, four, BufferView{buffer.handle(), 256, 4}); },
                   "amax_out: a view of 4 bytes at offset 256 lies outside its buffer of 256 bytes");
  });
  // Whole-block copies (no storage-buffer binding): the pools' views are checked too.
  const int64_t n = 4, hkv = 1, d = 16, b = 4;
  const DeviceBuffer keys = ctx().create_buffer(size_t(n * hkv * d * b * 2));
  const DeviceBuffer values = ctx().create_buffer(size_t(n * hkv * d * b * 2));
  LayerCacheViews layer{keys.tensor(DType::f16, Shape{n, hkv, d / 8, b, 8}), values.tensor(DType::f16, Shape{n, hkv, d, b})};
  layer.value_cache.memory.offset = 16;
  const std::vector<LayerCacheViews> layers{layer};
  const std::vector<BlockCopy> pairs{{0, 1}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_copy_blocks(ctx(), cmd, layers, pairs); }, "layers[0].value_cache: a view of 512 bytes at offset 16");
  });
}

// The registry behind those checks: a buffer is known while it lives, by its device.
TEST_F(BufferBoundsTest, TheLibraryKnowsTheSizeOfEveryBufferItMade) {
  VkBuffer handle = VK_NULL_HANDLE;
  {
    DeviceBuffer buffer = ctx().create_buffer(1000);
    handle = buffer.handle();
    EXPECT_EQ(vk::registered_buffer_size(ctx().device(), handle), std::optional<VkDeviceSize>(1000));
    EXPECT_EQ(vk::registered_buffer_size(VK_NULL_HANDLE, handle), std::nullopt) << "the device is part of the key";
    DeviceBuffer moved = ctx().create_buffer(8);
    moved = std::move(buffer);
    EXPECT_EQ(vk::registered_buffer_size(ctx().device(), handle), std::optional<VkDeviceSize>(1000)) << "moves keep it";
  }
  EXPECT_EQ(vk::registered_buffer_size(ctx().device(), handle), std::nullopt) << "destroyed buffers are forgotten";
}

}  // namespace
}  // namespace vkpaged::test
