// SPDX-License-Identifier: Apache-2.0
// Every public header, compiled as C++17 with warnings as errors (tests/CMakeLists.txt): a
// C++20 feature in a header fails the build here, before a consumer meets it. The calls below
// are what a C++17 engine writes with vkpaged::Span (vectors, arrays, a pointer and a count).
#include <vkpaged/attention.hpp>
#include <vkpaged/block_manager.hpp>
#include <vkpaged/cache_ops.hpp>
#include <vkpaged/context.hpp>
#include <vkpaged/decode.hpp>
#include <vkpaged/dtype.hpp>
#include <vkpaged/error.hpp>
#include <vkpaged/export.hpp>
#include <vkpaged/kv_cache.hpp>
#include <vkpaged/kv_layout.hpp>
#include <vkpaged/log.hpp>
#include <vkpaged/merge.hpp>
#include <vkpaged/mla.hpp>
#include <vkpaged/mla_attention.hpp>
#include <vkpaged/mla_cache_ops.hpp>
#include <vkpaged/prepare.hpp>
#include <vkpaged/reference.hpp>
#include <vkpaged/rotary.hpp>
#include <vkpaged/span.hpp>
#include <vkpaged/tensor.hpp>
#include <vkpaged/utilities.hpp>
#include <vkpaged/vkpaged.h>

#include <array>
#include <cstdint>
#include <vector>

static_assert(__cplusplus == 201703L, "this file checks the headers as C++17");

namespace {

// Never called: it only has to compile.
[[maybe_unused]] void uses_spans(vkpaged::BlockManager& manager, vkpaged::KvCache& cache, VkCommandBuffer cmd) {
  const std::vector<int32_t> prompt = {1, 2, 3};
  manager.add_sequence(1, prompt);
  const std::array<uint64_t, 2> ids = {1, 2};
  const vkpaged::BatchArrays batch = manager.build_batch(ids, 4);
  const std::vector<vkpaged::BlockCopy> copies = manager.swap_out(ids);
  cache.record_copy_blocks(cmd, copies);
  const vkpaged::Span<const vkpaged::LayerCacheViews> layers = cache.layers();
  static_cast<void>(layers.size() + batch.context_lens.size());
  static_cast<void>(vkpaged::BlockCopy{0, 1} == vkpaged::BlockCopy{0, 1});
}

}  // namespace
