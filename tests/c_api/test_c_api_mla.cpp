// SPDX-License-Identifier: Apache-2.0
// MLA through the C API: KvCache shapes of both MLA kinds sized as the C++ API sizes them, their
// per-layer pools, the per-layer write (with and without RoPE) and the bare write bit for bit as
// the C++ reference stores them, and the refusals naming the argument.
#include <cstring>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

vkp_kv_cache_shape mla_c_shape(vkp_kv_cache_kind kind) {
  vkp_kv_cache_shape s;
  vkp_kv_cache_shape_init(&s);
  s.num_layers = 2;
  s.num_kv_heads = 1;
  s.head_size = 64;  // Dv
  s.block_size = 16;
  s.dtype = VKP_DTYPE_BF16;
  s.layout = VKP_KV_LAYOUT_NHD;
  s.kind = kind;
  s.rope_head_size = 32;
  return s;
}

class CApiMlaTest : public GpuTest {};

TEST_F(CApiMlaTest, ShapesSizeAsTheCppApi) {
  vkp_kv_cache_shape defaults;
  vkp_kv_cache_shape_init(&defaults);
  EXPECT_EQ(defaults.kind, VKP_KV_CACHE_KEY_VALUE);
  EXPECT_EQ(defaults.rope_head_size, 0u);
  for (vkp_kv_cache_kind kind : {VKP_KV_CACHE_MLA_ONE_POOL, VKP_KV_CACHE_MLA_TWO_POOLS}) {
    const vkp_kv_cache_shape shape = mla_c_shape(kind);
    vkp_kv_cache_sizing sizing;
    vkp_kv_cache_sizing_init(&sizing);
    ASSERT_VKP_OK(vkp_kv_cache_sizing_of(&shape, 100, &sizing));
    KvCacheShape cpp{2, 1, 64, 16, DType::bf16, KvLayout::nhd, KvCacheKind(kind), 32};
    const KvCacheSizing want = KvCache::sizing(cpp, 100);
    EXPECT_EQ(sizing.total_bytes, want.total_bytes);
    EXPECT_EQ(sizing.total_bytes, 100u * 2 * 16 * 96 * 2);
    EXPECT_EQ(sizing.block_bytes, want.block_bytes);
  }
  vkp_kv_cache_shape bad = mla_c_shape(VKP_KV_CACHE_MLA_ONE_POOL);
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  bad.kind = vkp_kv_cache_kind(9);
  expect_refused(vkp_kv_cache_sizing_of(&bad, 1, &sizing), "shape.kind: 9 is not a vkp_kv_cache_kind");
  bad = mla_c_shape(VKP_KV_CACHE_MLA_ONE_POOL);
  bad.num_kv_heads = 4;
  expect_refused(vkp_kv_cache_sizing_of(&bad, 1, &sizing), "num_kv_heads 4 for an MLA cache");
}

TEST_F(CApiMlaTest, CacheWritesAsTheReference) {
  vkp_context* cctx = c_context();
  for (vkp_kv_cache_kind kind : {VKP_KV_CACHE_MLA_ONE_POOL, VKP_KV_CACHE_MLA_TWO_POOLS}) {
    SCOPED_TRACE(int(kind));
    const vkp_kv_cache_shape shape = mla_c_shape(kind);
    const vkp_kv_cache_options options = kv_cache_options(4);
    vkp_kv_cache* raw = nullptr;
    ASSERT_VKP_OK(vkp_kv_cache_create(cctx, &shape, &options, &raw));
    CachePtr cache(raw, &vkp_kv_cache_destroy);
    vkp_mla_cache_views pools[2];
    for (uint32_t l = 0; l < 2; ++l) {
      vkp_mla_cache_views_init(&pools[l]);
      ASSERT_VKP_OK(vkp_kv_cache_mla_layer(raw, l, VKP_FALSE, &pools[l]));
    }
    const bool one = kind == VKP_KV_CACHE_MLA_ONE_POOL;
    EXPECT_EQ(pools[0].mla_cache.memory.buffer != VK_NULL_HANDLE, one);
    EXPECT_EQ(pools[0].kpe_cache.memory.buffer != VK_NULL_HANDLE, !one);
    // Zeroed pools, then 11 tokens into layer 1 with RoPE and into layer 0 without.
    reference::MlaHostCache zero;
    if (one) {
      zero.mla_cache = HostTensor(DType::bf16, Shape{4, 16, 96});
    } else {
      zero.ckv_cache = HostTensor(DType::bf16, Shape{4, 16, 64});
      zero.kpe_cache = HostTensor(DType::bf16, Shape{4, 16, 32});
    }
    auto views_of = [&](const vkp_mla_cache_views& p) {
      std::vector<std::pair<const vkp_tensor_view*, const HostTensor*>> v;
      if (one) v.push_back({&p.mla_cache, &zero.mla_cache});
      if (!one) v = {{&p.ckv_cache, &zero.ckv_cache}, {&p.kpe_cache, &zero.kpe_cache}};
      return v;
    };
    for (const auto& p : pools)
      for (const auto& [view, host] : views_of(p)) ASSERT_VKP_OK(vkp_upload(cctx, &view->memory, host->data(), host->bytes()));
    const HostTensor kv_c = cache_helpers::random_tensor(DType::f16, Shape{11, 64}, 3);
    const HostTensor k_pe = cache_helpers::random_tensor(DType::f16, Shape{11, 32}, 4);
    HostTensor slots(DType::i64, Shape{11}), positions(DType::i32, Shape{11});
    for (int64_t t = 0; t < 11; ++t) {
      slots.set(size_t(t), t == 6 ? -1.0 : double(63 - 5 * t));
      positions.set(size_t(t), double(3 * t));
    }
    const HostTensor cos_sin = rotary_cos_sin_cache(64, 32);
    const CTensor d_kv_c = upload(cctx, kv_c), d_k_pe = upload(cctx, k_pe), d_slots = upload(cctx, slots);
    const CTensor d_positions = upload(cctx, positions), d_cos_sin = upload(cctx, cos_sin);
    const vkp_mla_new_tokens tokens = mla_new_tokens(d_kv_c, d_k_pe, d_slots);
    vkp_mla_rope_views defaults;
    vkp_mla_rope_views_init(&defaults);
    EXPECT_EQ(defaults.style, VKP_ROTARY_NEOX);
    const vkp_mla_rope_views rope = mla_rope(d_positions, d_cos_sin, VKP_ROTARY_NEOX);
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      vkp_status s = vkp_kv_cache_record_mla_reshape_and_cache(raw, cmd, 1, &tokens, 1.0f, &rope);
      if (s == VKP_OK) s = vkp_kv_cache_record_mla_reshape_and_cache(raw, cmd, 0, &tokens, 1.0f, nullptr);
      return s;
    }));
    // Layer 0 as the reference writes k_pe; layer 1 as it writes k_pe rotated by the GPU.
    HostTensor rotated(DType::f16, Shape{11, 1, 32}), no_query;
    std::memcpy(rotated.data(), k_pe.data(), k_pe.bytes());
    rotary_embedding(ctx(), no_query, rotated, positions, cos_sin, RotaryStyle::neox);
    HostTensor rotated_rows(DType::f16, k_pe.shape());
    std::memcpy(rotated_rows.data(), rotated.data(), rotated.bytes());
    for (uint32_t l = 0; l < 2; ++l) {
      reference::MlaHostCache want = zero;
      reference::mla_reshape_and_cache(kv_c, l == 1 ? rotated_rows : k_pe, slots, want);
      const std::vector<const HostTensor*> wanted =
          one ? std::vector<const HostTensor*>{&want.mla_cache} : std::vector<const HostTensor*>{&want.ckv_cache, &want.kpe_cache};
      const auto views = views_of(pools[l]);
      for (size_t i = 0; i < views.size(); ++i) {
        HostTensor got(DType::bf16, wanted[i]->shape());
        ASSERT_VKP_OK(vkp_download(cctx, &views[i].first->memory, got.data(), got.bytes()));
        EXPECT_TRUE(cache_helpers::bytes_equal(got, *wanted[i])) << "layer " << l << " pool " << i;
      }
    }

    // The bare write over the layer's views does what the cache's did.
    vkp_mla_reshape_and_cache_views bare;
    vkp_mla_reshape_and_cache_views_init(&bare);
    bare.kv_c = d_kv_c.view;
    bare.k_pe = d_k_pe.view;
    bare.slot_mapping = d_slots.view;
    bare.mla_cache = pools[0].mla_cache;
    bare.ckv_cache = pools[0].ckv_cache;
    bare.kpe_cache = pools[0].kpe_cache;
    std::vector<HostTensor> before;
    for (const auto& [view, host] : views_of(pools[0])) {
      HostTensor h(DType::bf16, host->shape());
      ASSERT_VKP_OK(vkp_download(cctx, &view->memory, h.data(), h.bytes()));
      before.push_back(h);
    }
    for (const auto& [view, host] : views_of(pools[0])) ASSERT_VKP_OK(vkp_upload(cctx, &view->memory, host->data(), host->bytes()));
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_mla_reshape_and_cache(cctx, cmd, &bare, 1.0f, nullptr); }));
    size_t i = 0;
    for (const auto& [view, host] : views_of(pools[0])) {
      HostTensor h(DType::bf16, host->shape());
      ASSERT_VKP_OK(vkp_download(cctx, &view->memory, h.data(), h.bytes()));
      EXPECT_TRUE(cache_helpers::bytes_equal(h, before[i++])) << "the bare write";
    }

    // Refusals name the argument.
    EXPECT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      expect_refused(vkp_kv_cache_record_mla_reshape_and_cache(raw, cmd, 2, &tokens, 1.0f, nullptr),
                     "layer 2 is outside [0, 2) layers");
      expect_refused(vkp_kv_cache_record_mla_reshape_and_cache(raw, cmd, 0, &tokens, -2.0f, nullptr), "scale: -2");
      vkp_mla_rope_views bad_rope = rope;
      bad_rope.style = vkp_rotary_style(5);
      expect_refused(vkp_kv_cache_record_mla_reshape_and_cache(raw, cmd, 0, &tokens, 1.0f, &bad_rope),
                     "rope.style: 5 is not a vkp_rotary_style");
      vkp_mla_reshape_and_cache_views both = bare;
      both.mla_cache = pools[0].ckv_cache.memory.buffer ? pools[0].ckv_cache : pools[0].mla_cache;
      both.ckv_cache = pools[1].ckv_cache.memory.buffer ? pools[1].ckv_cache : pools[1].mla_cache;
      expect_refused(vkp_record_mla_reshape_and_cache(cctx, cmd, &both, 1.0f, nullptr), "mla_cache: given together");
      vkp_layer_cache_views kv;
      vkp_layer_cache_views_init(&kv);
      expect_refused(vkp_kv_cache_layer(raw, 0, VKP_FALSE, &kv), "the cache holds MLA pools");
      return VKP_OK;
    }));
  }
}

}  // namespace
}  // namespace vkpaged::test
