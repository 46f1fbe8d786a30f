// SPDX-License-Identifier: Apache-2.0
// copy_blocks and swap_blocks on the GPU against the CPU reference, byte for byte, over
// several layers of different dtypes, block shapes and layouts (whole blocks move alike in
// each); device <-> host-visible swaps in both directions; refusals that name the argument and
// leave every pool as it was.
#include <cstring>
#include <vector>

#include "ops/cache_test_helpers.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

struct LayerConfig {
  DType dtype;
  int64_t blocks, kv_heads, head_size, block_size;
  KvLayout layout = KvLayout::vllm;
};

struct Layer {
  HostTensor key, value;
  DeviceTensor d_key, d_value;
  KvLayout layout = KvLayout::vllm;
  LayerCacheViews views() const { return {d_key.view, d_value.view, layout}; }
  // The device (or host-visible) pools as they are now.
  Layer fetched(Context& ctx) const {
    Layer l;
    l.layout = layout;
    l.key = download(ctx, d_key);
    l.value = download(ctx, d_value);
    return l;
  }
};

Layer make_layer(Context& ctx, const LayerConfig& c, uint32_t seed, MemoryKind kind = MemoryKind::device) {
  Layer l;
  l.layout = c.layout;
  l.key = random_tensor(c.dtype, key_cache_shape(c.layout, c.dtype, c.blocks, c.kv_heads, c.head_size, c.block_size),
                        seed);
  l.value =
      random_tensor(c.dtype, value_cache_shape(c.layout, c.blocks, c.kv_heads, c.head_size, c.block_size), seed + 1);
  l.d_key = upload(ctx, l.key, kind);
  l.d_value = upload(ctx, l.value, kind);
  return l;
}

void expect_layer_equal(Context& ctx, const Layer& got, const Layer& want, const std::string& what) {
  const Layer now = got.fetched(ctx);
  EXPECT_TRUE(bytes_equal(now.key, want.key)) << what << " key pool";
  EXPECT_TRUE(bytes_equal(now.value, want.value)) << what << " value pool";
}

std::vector<LayerCacheViews> views_of(const std::vector<Layer>& layers) {
  std::vector<LayerCacheViews> v;
  for (const auto& l : layers) v.push_back(l.views());
  return v;
}

// Layers of one cache may differ in everything but N for copy_blocks' pairs to fit them all.
const LayerConfig kCopyLayers[] = {
    {DType::f16, 8, 2, 64, 16},
    {DType::fp8_e4m3, 8, 1, 80, 8},
    {DType::f32, 8, 3, 128, 1},
    {DType::u8, 8, 2, 64, 32},
    {DType::bf16, 8, 2, 64, 16, KvLayout::nhd},
    {DType::fp8_e5m2, 8, 3, 64, 4, KvLayout::hnd},
};

class CopyBlocksTest : public GpuTest {};

TEST_F(CopyBlocksTest, MatchesReferenceInEveryLayer) {
  std::vector<Layer> layers;
  for (size_t i = 0; i < std::size(kCopyLayers); ++i)
    layers.push_back(make_layer(ctx(), kCopyLayers[i], uint32_t(10 * i + 1)));
  // One source to two destinations, a no-op, a copy to a lower id.
  const std::vector<BlockCopy> pairs = {{0, 3}, {0, 5}, {2, 2}, {7, 1}, {4, 6}};
  const auto views = views_of(layers);
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_copy_blocks(ctx(), cmd, views, pairs); });
  for (size_t i = 0; i < layers.size(); ++i) {
    reference::copy_blocks(layers[i].key, layers[i].value, pairs, layers[i].layout);
    expect_layer_equal(ctx(), layers[i], layers[i], "layer " + std::to_string(i));
  }
}

TEST_F(CopyBlocksTest, RefusesBadPairsAndLayersBeforeRecording) {
  std::vector<Layer> layers;
  for (size_t i = 0; i < 2; ++i) layers.push_back(make_layer(ctx(), kCopyLayers[i], uint32_t(20 + i)));
  auto refused = [&](std::vector<BlockCopy> pairs, const std::string& name, auto spoil) {
    auto views = views_of(layers);
    spoil(views);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_copy_blocks(ctx(), cmd, views, pairs); }, name);
  };
  auto none = [](std::vector<LayerCacheViews>&) {};
  refused({{1, 2}, {3, 8}}, "pairs[1].dst: block id 8 is outside [0, N = 8)", none);
  refused({{-1, 2}}, "pairs[0].src: block id -1", none);
  refused({{1, 2}, {3, 2}}, "pairs[1].dst: block 2 is already the destination of pairs[0]", none);
  refused({{1, 2}, {2, 3}}, "pairs[1].src: block 2 is also the destination of pairs[0]", none);
  refused({{1, 2}}, "layers[1].key_cache: shape", [](auto& v) { v[1].value_cache.shape = Shape{8, 1, 80, 16}; });
  refused({{1, 2}}, "layers[0].value_cache: buffer view", [](auto& v) { v[0].value_cache.memory.size -= 1; });
  refused({{1, 2}}, "layers[1].value_cache: dtype f16", [](auto& v) { v[1].value_cache.dtype = DType::f16; });
  refused({{1, 2}}, "(the hnd layout)", [](auto& v) { v[0].layout = KvLayout::hnd; });
  refused({{1, 2}}, "layers[1].layout: 4 is not a cache layout", [](auto& v) { v[1].layout = KvLayout(4); });
  for (size_t i = 0; i < layers.size(); ++i)
    expect_layer_equal(ctx(), layers[i], layers[i], "refused calls left layer " + std::to_string(i));
}

// A transfer -> host barrier, so that the host sees what the copies wrote to mapped memory.
void record_host_read_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0,
                       nullptr);
}

HostTensor read_mapped(const DeviceTensor& d) {
  HostTensor h(d.view.dtype, d.view.shape);
  std::memcpy(h.data(), d.buffer.mapped(), h.bytes());
  return h;
}

const LayerConfig kDeviceLayers[] = {{DType::bf16, 10, 2, 80, 16}, {DType::fp8_e5m2, 10, 2, 64, 8, KvLayout::nhd}};
const LayerConfig kHostLayers[] = {{DType::bf16, 4, 2, 80, 16}, {DType::fp8_e5m2, 4, 2, 64, 8, KvLayout::nhd}};

class SwapBlocksTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    for (size_t i = 0; i < 2; ++i) {
      device_.push_back(make_layer(ctx(), kDeviceLayers[i], uint32_t(30 + 2 * i)));
      host_.push_back(make_layer(ctx(), kHostLayers[i], uint32_t(40 + 2 * i), MemoryKind::host_visible));
    }
  }
  std::vector<Layer> device_, host_;
};

TEST_F(SwapBlocksTest, DeviceToHostAndBack) {
  ASSERT_NE(host_[0].d_key.buffer.mapped(), nullptr);
  const std::vector<BlockCopy> out = {{7, 0}, {2, 3}, {9, 1}};
  const auto device_views = views_of(device_), host_views = views_of(host_);
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_swap_blocks(ctx(), cmd, device_views, host_views, out);
    record_host_read_barrier(cmd);
  });
  for (size_t i = 0; i < 2; ++i) {
    reference::swap_blocks(device_[i].key, device_[i].value, host_[i].key, host_[i].value, out, device_[i].layout);
    EXPECT_TRUE(bytes_equal(read_mapped(host_[i].d_key), host_[i].key)) << "host key pool " << i;
    EXPECT_TRUE(bytes_equal(read_mapped(host_[i].d_value), host_[i].value)) << "host value pool " << i;
  }

  // Swap in: host blocks into other device blocks (the host pools now hold what went out).
  const std::vector<BlockCopy> in = {{0, 5}, {3, 0}, {2, 9}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_swap_blocks(ctx(), cmd, host_views, device_views, in); });
  for (size_t i = 0; i < 2; ++i) {
    reference::swap_blocks(host_[i].key, host_[i].value, device_[i].key, device_[i].value, in, host_[i].layout);
    expect_layer_equal(ctx(), device_[i], device_[i], "device layer " + std::to_string(i));
  }
}

TEST_F(SwapBlocksTest, RefusesBadPairsAndLayoutsBeforeRecording) {
  auto refused = [&](std::vector<BlockCopy> pairs, const std::string& name, auto spoil) {
    auto src = views_of(device_), dst = views_of(host_);
    spoil(src, dst);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_swap_blocks(ctx(), cmd, src, dst, pairs); }, name);
  };
  auto none = [](auto&, auto&) {};
  refused({{0, 4}}, "pairs[0].dst: block id 4 is outside [0, N = 4)", none);
  refused({{10, 0}}, "pairs[0].src: block id 10 is outside [0, N = 10)", none);
  refused({{1, 2}, {3, 2}}, "pairs[1].dst: block 2 is already the destination", none);
  refused({{1, 2}}, "dst: 1 layers given for 2 source layers", [](auto&, auto& dst) { dst.pop_back(); });
  refused({{1, 2}}, "dst[1].value_cache: shape [2, 8, 4, 64] (fp8_e5m2) has blocks unlike src[1]'s",
          [](auto&, auto& dst) { dst[1].key_cache.shape = dst[1].value_cache.shape = Shape{2, 8, 4, 64}; });
  refused({{1, 2}}, "dst[0]: its pools overlap src[0]'s", [](auto& src, auto& dst) { dst[0] = src[0]; });
  refused({{1, 2}}, "src[1].key_cache: no buffer", [](auto& src, auto&) { src[1].key_cache.memory = {}; });
  // The same blocks read in another layout: hnd [N, Hkv, B, D] views of the nhd host pools.
  refused({{1, 2}}, "dst[1].layout: hnd differs from src[1]'s nhd", [](auto&, auto& dst) {
    dst[1].layout = KvLayout::hnd;
    dst[1].key_cache.shape = dst[1].value_cache.shape = Shape{4, 2, 8, 64};
  });
  for (size_t i = 0; i < 2; ++i) {
    expect_layer_equal(ctx(), device_[i], device_[i], "refused calls left device layer " + std::to_string(i));
    EXPECT_TRUE(bytes_equal(read_mapped(host_[i].d_key), host_[i].key)) << "refused calls left host layer " << i;
  }
}

}  // namespace
}  // namespace vkpaged::test
