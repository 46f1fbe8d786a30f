// SPDX-License-Identifier: Apache-2.0
// The BlockManager through the C API, step for step beside a C++ BlockManager given the same
// calls: prefix hits, appends with copy-on-write after a fork, batch arrays and slot mappings,
// swapping out and in, preemption, accounting; errors with their status and message.
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "vkpaged/block_manager.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

using ManagerPtr = std::unique_ptr<vkp_block_manager, decltype(&vkp_block_manager_destroy)>;

std::vector<int32_t> table_of(vkp_block_manager* m, uint64_t seq, int32_t width = 0) {
  const int32_t* table = nullptr;
  size_t count = 0;
  EXPECT_VKP_OK(vkp_block_manager_block_table(m, seq, width, &table, &count));
  return {table, table + count};
}

std::vector<BlockCopy> pairs_of(const vkp_block_copy* pairs, size_t count) {
  std::vector<BlockCopy> v;
  for (size_t i = 0; i < count; ++i) v.push_back({pairs[i].src, pairs[i].dst});
  return v;
}

class CApiBlockManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vkp_block_manager_options options;
    vkp_block_manager_options_init(&options);
    EXPECT_EQ(options.watermark, BlockManagerOptions{}.watermark);
    EXPECT_EQ(options.enable_prefix_caching, VKP_TRUE);
    options.num_host_blocks = 8;
    options.hash_salt = 5;
    vkp_block_manager* raw = nullptr;
    ASSERT_VKP_OK(vkp_block_manager_create(kBlocks, kBlockSize, &options, &raw));
    c_.reset(raw);
    BlockManagerOptions o;
    o.num_host_blocks = 8;
    o.hash_salt = 5;
    cpp_ = BlockManager(kBlocks, kBlockSize, o);
  }
  static constexpr int32_t kBlocks = 16, kBlockSize = 4;
  ManagerPtr c_{nullptr, &vkp_block_manager_destroy};
  BlockManager cpp_{1, 1};
};

TEST_F(CApiBlockManagerTest, FollowsTheCppManagerStepForStep) {
  vkp_block_manager* m = c_.get();
  int32_t block_size = 0;
  ASSERT_VKP_OK(vkp_block_manager_block_size(m, &block_size));
  EXPECT_EQ(block_size, kBlockSize);

  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  vkp_admission admission = VKP_ADMISSION_NEVER;
  ASSERT_VKP_OK(vkp_block_manager_can_allocate(m, prompt.data(), prompt.size(), &admission));
  EXPECT_EQ(admission, VKP_ADMISSION_OK);
  int32_t cached = -1;
  ASSERT_VKP_OK(vkp_block_manager_add_sequence(m, 1, prompt.data(), prompt.size(), &cached));
  EXPECT_EQ(cached, cpp_.add_sequence(1, prompt));
  // The same prompt again: its two full blocks come from the prefix cache.
  ASSERT_VKP_OK(vkp_block_manager_add_sequence(m, 2, prompt.data(), prompt.size(), &cached));
  EXPECT_EQ(cached, cpp_.add_sequence(2, prompt));
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(table_of(m, 1), cpp_.block_table(1));
  EXPECT_EQ(table_of(m, 2, 5), cpp_.block_table(2, 5));

  // A fork shares the last, partly filled block: the child's next append copies it.
  ASSERT_VKP_OK(vkp_block_manager_fork(m, 1, 3));
  cpp_.fork(1, 3);
  vkp_bool32 can = VKP_FALSE;
  ASSERT_VKP_OK(vkp_block_manager_can_append(m, 3, &can));
  EXPECT_EQ(can, VKP_TRUE);
  vkp_append_result appended;
  vkp_append_result_init(&appended);
  ASSERT_VKP_OK(vkp_block_manager_append_token(m, 3, 11, &appended));
  const AppendResult want = cpp_.append_token(3, 11);
  EXPECT_EQ(appended.slot, want.slot);
  ASSERT_EQ(appended.has_copy, VKP_TRUE);
  ASSERT_TRUE(want.copy.has_value());
  EXPECT_EQ(appended.copy.src, want.copy->src);
  EXPECT_EQ(appended.copy.dst, want.copy->dst);
  int32_t refs = 0;
  ASSERT_VKP_OK(vkp_block_manager_ref_count(m, VKP_FALSE, appended.copy.src, &refs));
  EXPECT_EQ(refs, cpp_.device_allocator().ref_count(want.copy->src));

  // Batch arrays and the slots of the step.
  const uint64_t ids[] = {1, 2, 3};
  std::vector<int32_t> tables(3 * 4), lens(3);
  ASSERT_VKP_OK(vkp_block_manager_build_batch(m, ids, 3, 4, tables.data(), lens.data()));
  const BatchArrays batch = cpp_.build_batch(ids, 4);
  EXPECT_EQ(tables, batch.block_tables);
  EXPECT_EQ(lens, batch.context_lens);
  std::vector<int64_t> slots(3);
  ASSERT_VKP_OK(vkp_block_manager_slot_mapping(m, 3, 8, 3, slots.data()));
  EXPECT_EQ(slots, cpp_.slot_mapping(3, 8, 3));
  int32_t len = 0;
  ASSERT_VKP_OK(vkp_block_manager_context_len(m, 3, &len));
  EXPECT_EQ(len, 11);

  // Swap the forked pair out together, then back in.
  const uint64_t group[] = {1, 3};
  ASSERT_VKP_OK(vkp_block_manager_can_swap_out(m, group, 2, &can));
  EXPECT_EQ(can, VKP_TRUE);
  const vkp_block_copy* pairs = nullptr;
  size_t num_pairs = 0;
  ASSERT_VKP_OK(vkp_block_manager_swap_out(m, group, 2, &pairs, &num_pairs));
  EXPECT_EQ(pairs_of(pairs, num_pairs), cpp_.swap_out(group));
  vkp_bool32 swapped = VKP_FALSE;
  ASSERT_VKP_OK(vkp_block_manager_is_swapped(m, 3, &swapped));
  EXPECT_EQ(swapped, VKP_TRUE);
  const int32_t* host_table = nullptr;
  size_t host_count = 0;
  ASSERT_VKP_OK(vkp_block_manager_host_block_table(m, 3, &host_table, &host_count));
  EXPECT_EQ(std::vector<int32_t>(host_table, host_table + host_count), cpp_.host_block_table(3));
  ASSERT_VKP_OK(vkp_block_manager_can_swap_in(m, group, 2, &admission));
  EXPECT_EQ(admission, VKP_ADMISSION_OK);
  ASSERT_VKP_OK(vkp_block_manager_swap_in(m, group, 2, &pairs, &num_pairs));
  EXPECT_EQ(pairs_of(pairs, num_pairs), cpp_.swap_in(group));

  // Preempt and free; accounting agrees all along.
  int32_t tokens = 0;
  ASSERT_VKP_OK(vkp_block_manager_preempt(m, 2, &tokens));
  EXPECT_EQ(tokens, cpp_.preempt(2));
  ASSERT_VKP_OK(vkp_block_manager_free_sequence(m, 3));
  cpp_.free_sequence(3);
  vkp_bool32 present = VKP_TRUE;
  ASSERT_VKP_OK(vkp_block_manager_contains(m, 3, &present));
  EXPECT_EQ(present, VKP_FALSE);
  vkp_block_usage usage;
  vkp_block_usage_init(&usage);
  ASSERT_VKP_OK(vkp_block_manager_usage(m, &usage));
  const BlockUsage u = cpp_.usage();
  EXPECT_EQ(usage.num_blocks, u.num_blocks);
  EXPECT_EQ(usage.in_use, u.in_use);
  EXPECT_EQ(usage.free, u.free);
  EXPECT_EQ(usage.cached, u.cached);
  EXPECT_EQ(usage.num_host_blocks, u.num_host_blocks);
  EXPECT_EQ(usage.host_in_use, u.host_in_use);
  vkp_prefix_cache_stats stats;
  vkp_prefix_cache_stats_init(&stats);
  ASSERT_VKP_OK(vkp_block_manager_prefix_cache_stats(m, &stats));
  EXPECT_EQ(stats.queries, cpp_.prefix_cache_stats().queries);
  EXPECT_EQ(stats.hit_blocks, cpp_.prefix_cache_stats().hit_blocks);
  EXPECT_EQ(stats.hit_tokens, cpp_.prefix_cache_stats().hit_tokens);
}

TEST_F(CApiBlockManagerTest, ErrorsCarryTheirStatusAndChangeNothing) {
  vkp_block_manager* m = c_.get();
  const std::vector<int32_t> prompt(9, 7);
  ASSERT_VKP_OK(vkp_block_manager_add_sequence(m, 1, prompt.data(), prompt.size(), nullptr));
  expect_refused(vkp_block_manager_add_sequence(m, 1, prompt.data(), prompt.size(), nullptr), "1");
  vkp_append_result r;
  vkp_append_result_init(&r);
  expect_refused(vkp_block_manager_append_token(m, 42, 0, &r), "42");
  expect_refused(vkp_block_manager_add_sequence(m, 2, nullptr, 3, nullptr), "prompt is NULL");
  expect_refused(vkp_block_manager_block_table(m, 1, -2, nullptr, nullptr), "table is NULL");
  const int32_t* table = nullptr;
  size_t count = 0;
  expect_refused(vkp_block_manager_block_table(m, 1, -2, &table, &count), "width: -2");
  // More blocks than the cache has: out of memory, and the manager is as it was.
  const std::vector<int32_t> huge(size_t(kBlocks * kBlockSize + 1), 3);
  vkp_admission admission;
  ASSERT_VKP_OK(vkp_block_manager_can_allocate(m, huge.data(), huge.size(), &admission));
  EXPECT_EQ(admission, VKP_ADMISSION_NEVER);
  vkp_block_usage before, after;
  vkp_block_usage_init(&before);
  vkp_block_usage_init(&after);
  ASSERT_VKP_OK(vkp_block_manager_usage(m, &before));
  EXPECT_EQ(vkp_block_manager_add_sequence(m, 3, huge.data(), huge.size(), nullptr), VKP_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(vkp_last_error()).find("vkp_block_manager_add_sequence"), std::string::npos);
  ASSERT_VKP_OK(vkp_block_manager_usage(m, &after));
  EXPECT_EQ(after.in_use, before.in_use);
  EXPECT_EQ(after.free, before.free);
  vkp_block_manager* bad = nullptr;
  expect_refused(vkp_block_manager_create(0, 16, nullptr, &bad), "num_blocks");
  EXPECT_EQ(bad, nullptr);
}

}  // namespace
}  // namespace vkpaged::test
