// SPDX-License-Identifier: Apache-2.0
// C API: the host-side BlockManager. Arrays of unknown length (swap pairs, block tables) are
// kept in the handle and handed out by pointer; arrays whose length the caller knows (batch
// arrays, slot mappings) are written into the caller's memory.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

std::span<const int32_t> prompt_of(const int32_t* prompt, size_t len) { return array_of(prompt, len, "prompt"); }
std::span<const uint64_t> ids_of(const uint64_t* ids, size_t count) { return array_of(ids, count, "seq_ids"); }

void hand_out_pairs(vkp_block_manager& m, const std::vector<BlockCopy>& pairs, const vkp_block_copy** out,
                    size_t* count) {
  m.pairs.clear();
  for (const auto& p : pairs) m.pairs.push_back(to_c(p));
  *out = m.pairs.data();
  *count = m.pairs.size();
}

// swap_out / swap_in: the group's copies kept in the handle and handed out by pointer.
vkp_status swap_group(const char* function, vkp_block_manager* manager, const uint64_t* seq_ids, size_t num_seqs,
                      const vkp_block_copy** pairs, size_t* num_pairs,
                      std::vector<BlockCopy> (BlockManager::*swap)(Span<const uint64_t>)) {
  return guarded(function, [&] {
    auto& h = *require(manager, "manager");
    require(pairs, "pairs");
    require(num_pairs, "num_pairs");
    hand_out_pairs(h, (h.manager.*swap)(ids_of(seq_ids, num_seqs)), pairs, num_pairs);
  });
}

void hand_out_table(vkp_block_manager& m, std::vector<int32_t> table, const int32_t** out, size_t* count) {
  m.table = std::move(table);
  *out = m.table.data();
  *count = m.table.size();
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_block_manager_create(int32_t num_blocks, int32_t block_size,
                                            const vkp_block_manager_options* options, vkp_block_manager** out) {
  return guarded("vkp_block_manager_create", [&] {
    require(out, "out");
    *out = nullptr;
    const BlockManagerOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *out = adopt(new vkp_block_manager{BlockManager(num_blocks, block_size, o), {}, {}});
  });
}

VKP_API void VKP_CALL vkp_block_manager_destroy(vkp_block_manager* manager) {
  destroy_handle("vkp_block_manager_destroy", manager, "manager");
}

VKP_API vkp_status VKP_CALL vkp_block_manager_block_size(const vkp_block_manager* manager, int32_t* out) {
  return guarded("vkp_block_manager_block_size", [&] {
    auto* result = require(out, "out");
    *result = require(manager, "manager")->manager.block_size();
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_can_allocate(const vkp_block_manager* manager, const int32_t* prompt,
                                                  size_t prompt_len, vkp_admission* out) {
  return answer("vkp_block_manager_can_allocate", manager, "manager", out,
                [&](const vkp_block_manager& h) { return to_c(h.manager.can_allocate(prompt_of(prompt, prompt_len))); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_add_sequence(vkp_block_manager* manager, uint64_t seq_id, const int32_t* prompt,
                                                  size_t prompt_len, int32_t* cached_tokens) {
  return guarded("vkp_block_manager_add_sequence", [&] {
    auto& m = require(manager, "manager")->manager;
    const int32_t cached = m.add_sequence(seq_id, prompt_of(prompt, prompt_len));
    if (cached_tokens != nullptr) *cached_tokens = cached;
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_can_append(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out) {
  return answer("vkp_block_manager_can_append", manager, "manager", out,
                [&](const vkp_block_manager& h) { return to_c_bool(h.manager.can_append(seq_id)); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_append_token(vkp_block_manager* manager, uint64_t seq_id, int32_t token,
                                                  vkp_append_result* out) {
  return guarded("vkp_block_manager_append_token", [&] {
    auto& m = require(manager, "manager")->manager;
    const StructOut result(out, "out");
    const AppendResult r = m.append_token(seq_id, token);
    vkp_append_result c = result.blank();
    c.slot = r.slot;
    c.has_copy = to_c_bool(r.copy.has_value());
    c.copy = r.copy ? to_c(*r.copy) : vkp_block_copy{0, 0};
    result.set(c);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_fork(vkp_block_manager* manager, uint64_t parent_id, uint64_t child_id) {
  return guarded("vkp_block_manager_fork", [&] { require(manager, "manager")->manager.fork(parent_id, child_id); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_free_sequence(vkp_block_manager* manager, uint64_t seq_id) {
  return guarded("vkp_block_manager_free_sequence",
                 [&] { require(manager, "manager")->manager.free_sequence(seq_id); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_preempt(vkp_block_manager* manager, uint64_t seq_id, int32_t* num_tokens) {
  return guarded("vkp_block_manager_preempt", [&] {
    const int32_t n = require(manager, "manager")->manager.preempt(seq_id);
    if (num_tokens != nullptr) *num_tokens = n;
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_can_swap_out(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                  size_t num_seqs, vkp_bool32* out) {
  return guarded("vkp_block_manager_can_swap_out", [&] {
    const auto& m = require(manager, "manager")->manager;
    const auto ids = ids_of(seq_ids, num_seqs);
    auto* result = require(out, "out");
    *result = to_c_bool(m.can_swap_out(ids));
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_can_swap_in(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                 size_t num_seqs, vkp_admission* out) {
  return answer("vkp_block_manager_can_swap_in", manager, "manager", out,
                [&](const vkp_block_manager& h) { return to_c(h.manager.can_swap_in(ids_of(seq_ids, num_seqs))); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_swap_out(vkp_block_manager* manager, const uint64_t* seq_ids, size_t num_seqs,
                                              const vkp_block_copy** pairs, size_t* num_pairs) {
  return swap_group("vkp_block_manager_swap_out", manager, seq_ids, num_seqs, pairs, num_pairs, &BlockManager::swap_out);
}

VKP_API vkp_status VKP_CALL vkp_block_manager_swap_in(vkp_block_manager* manager, const uint64_t* seq_ids, size_t num_seqs,
                                             const vkp_block_copy** pairs, size_t* num_pairs) {
  return swap_group("vkp_block_manager_swap_in", manager, seq_ids, num_seqs, pairs, num_pairs, &BlockManager::swap_in);
}

VKP_API vkp_status VKP_CALL vkp_block_manager_contains(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out) {
  return answer("vkp_block_manager_contains", manager, "manager", out,
                [&](const vkp_block_manager& h) { return to_c_bool(h.manager.contains(seq_id)); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_is_swapped(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out) {
  return answer("vkp_block_manager_is_swapped", manager, "manager", out,
                [&](const vkp_block_manager& h) { return to_c_bool(h.manager.is_swapped(seq_id)); });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_context_len(const vkp_block_manager* manager, uint64_t seq_id, int32_t* out) {
  return guarded("vkp_block_manager_context_len", [&] {
    auto* result = require(out, "out");
    *result = require(manager, "manager")->manager.context_len(seq_id);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_block_table(vkp_block_manager* manager, uint64_t seq_id, int32_t width,
                                                 const int32_t** table, size_t* count) {
  return guarded("vkp_block_manager_block_table", [&] {
    auto& h = *require(manager, "manager");
    require(table, "table");
    require(count, "count");
    if (width < 0) throw Error(ErrorCode::invalid_argument, fmt::format("width: {} is negative", width));
    hand_out_table(h, width == 0 ? h.manager.block_table(seq_id) : h.manager.block_table(seq_id, width), table, count);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_host_block_table(vkp_block_manager* manager, uint64_t seq_id,
                                                      const int32_t** table, size_t* count) {
  return guarded("vkp_block_manager_host_block_table", [&] {
    auto& h = *require(manager, "manager");
    require(table, "table");
    require(count, "count");
    hand_out_table(h, h.manager.host_block_table(seq_id), table, count);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_build_batch(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                 size_t num_seqs, int32_t width, int32_t* block_tables,
                                                 int32_t* context_lens) {
  return guarded("vkp_block_manager_build_batch", [&] {
    const auto& m = require(manager, "manager")->manager;
    const auto ids = ids_of(seq_ids, num_seqs);
    check_not_negative(width, "width");
    if (num_seqs > 0) {
      require(context_lens, "context_lens");
      if (width > 0) require(block_tables, "block_tables");
    }
    const BatchArrays batch = m.build_batch(ids, width);
    std::copy(batch.block_tables.begin(), batch.block_tables.end(), block_tables);
    std::copy(batch.context_lens.begin(), batch.context_lens.end(), context_lens);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_slot_mapping(const vkp_block_manager* manager, uint64_t seq_id,
                                                  int32_t first_token, int32_t count, int64_t* slots) {
  return guarded("vkp_block_manager_slot_mapping", [&] {
    const auto& m = require(manager, "manager")->manager;
    check_not_negative(first_token, "first_token");
    check_not_negative(count, "count");
    if (count > 0) require(slots, "slots");
    const std::vector<int64_t> v = m.slot_mapping(seq_id, first_token, count);
    std::copy(v.begin(), v.end(), slots);
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_usage(const vkp_block_manager* manager, vkp_block_usage* out) {
  return guarded("vkp_block_manager_usage", [&] {
    const BlockUsage u = require(manager, "manager")->manager.usage();
    const StructOut result(out, "out");
    result.set({uint32_t(sizeof(vkp_block_usage)), u.num_blocks, u.in_use, u.free, u.cached, u.num_host_blocks,
                u.host_in_use});
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_prefix_cache_stats(const vkp_block_manager* manager,
                                                        vkp_prefix_cache_stats* out) {
  return guarded("vkp_block_manager_prefix_cache_stats", [&] {
    const PrefixCacheStats s = require(manager, "manager")->manager.prefix_cache_stats();
    const StructOut result(out, "out");
    result.set({uint32_t(sizeof(vkp_prefix_cache_stats)), 0, s.queries, s.queried_blocks, s.hit_blocks,
                s.queried_tokens, s.hit_tokens});
  });
}

VKP_API vkp_status VKP_CALL vkp_block_manager_ref_count(const vkp_block_manager* manager, vkp_bool32 host, int32_t block,
                                               int32_t* out) {
  return guarded("vkp_block_manager_ref_count", [&] {
    const auto& m = require(manager, "manager")->manager;
    const bool on_host = to_bool(host, "host");
    require(out, "out");
    *out = (on_host ? m.host_allocator() : m.device_allocator()).ref_count(block);
  });
}

}  // extern "C"
