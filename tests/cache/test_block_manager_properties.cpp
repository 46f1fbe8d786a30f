// SPDX-License-Identifier: Apache-2.0
// Long random runs of every BlockManager operation. After each one, a checker recomputes
// reference counts from all block tables, and a simulated cache (the token written in every
// device and host slot, with the copy-on-write and swap copies applied as an engine would)
// must give back exactly the tokens each sequence was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "vkpaged/block_manager.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace {

struct SimulationConfig {
  uint32_t seed = 0;
  int32_t block_size = 4;
  bool prefix_caching = true;
  int32_t num_host_blocks = 16;
};

void PrintTo(const SimulationConfig& config, std::ostream* out) {
  *out << "seed " << config.seed << ", block_size " << config.block_size << ", prefix caching "
       << config.prefix_caching << ", " << config.num_host_blocks << " host blocks";
}

constexpr int32_t kNumBlocks = 48;
constexpr int kNumOperations = 4000;
constexpr int32_t kUnwritten = -1;

// Paths the run must have gone through for its checks to mean something.
struct Coverage {
  int copies_on_write = 0;
  int prefix_hit_tokens = 0;
  int evictions = 0;
  int swapped_blocks = 0;
  int refusals = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimulationConfig& config)
      : config_(config),
        manager_(kNumBlocks, config.block_size,
                 {.watermark = 0.05,
                  .enable_prefix_caching = config.prefix_caching,
                  .num_host_blocks = config.num_host_blocks}),
        rng_(config.seed),
        device_slots_(size_t{kNumBlocks} * config.block_size, kUnwritten),
        host_slots_(size_t(config.num_host_blocks) * config.block_size, kUnwritten) {
    // Shared prompt prefixes, so that prefix caching gets hits.
    for (int i = 0; i < 4; ++i) prefixes_.push_back(random_tokens(3 * config.block_size, 1000));
  }

  void run(int num_operations) {
    for (int step = 0; step < num_operations && !::testing::Test::HasFatalFailure(); ++step) {
      const int roll = uniform(0, 99);
      if (roll < 18 || expected_.empty()) {
        add(next_id_++, random_prompt());
      } else if (roll < 58) {
        append(random_sequence());
      } else if (roll < 66) {
        fork(random_sequence());
      } else if (roll < 76) {
        free(random_sequence());
      } else if (roll < 81) {
        preempt(random_sequence());
      } else if (roll < 90) {
        swap_out(random_group(false));
      } else {
        swap_in(random_group(true));
      }
      check_invariants();
    }
  }

  void free_everything() {
    while (!expected_.empty()) free(expected_.begin()->first);
    check_invariants();
    EXPECT_EQ(manager_.num_free_blocks() + manager_.num_cached_blocks(), kNumBlocks);
    EXPECT_EQ(manager_.host_allocator().num_free(), config_.num_host_blocks);
  }

  const Coverage& coverage() const { return coverage_; }

 private:
  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  std::vector<int32_t> random_tokens(int count, int vocabulary) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < count; ++i) tokens.push_back(uniform(0, vocabulary - 1));
    return tokens;
  }

  std::vector<int32_t> random_prompt() {
    const auto& prefix = prefixes_[uniform(0, static_cast<int>(prefixes_.size()) - 1)];
    std::vector<int32_t> prompt(prefix.begin(), prefix.begin() + uniform(0, int(prefix.size())));
    const std::vector<int32_t> tail = random_tokens(uniform(0, 2 * config_.block_size), 8);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    return prompt;
  }

  uint64_t random_sequence() {
    auto it = expected_.begin();
    std::advance(it, uniform(0, static_cast<int>(expected_.size()) - 1));
    return it->first;
  }

  // Up to three distinct sequences on one side (device or host).
  std::vector<uint64_t> random_group(bool swapped) {
    std::vector<uint64_t> candidates;
    for (const auto& [seq_id, tokens] : expected_)
      if (manager_.is_swapped(seq_id) == swapped) candidates.push_back(seq_id);
    std::shuffle(candidates.begin(), candidates.end(), rng_);
    candidates.resize(std::min<size_t>(candidates.size(), size_t(uniform(1, 3))));
    return candidates;
  }

  std::vector<int64_t> all_slots(uint64_t seq_id) {
    return manager_.slot_mapping(seq_id, 0, manager_.context_len(seq_id));
  }

  void add(uint64_t seq_id, const std::vector<int32_t>& prompt) {
    const AdmissionStatus admission = manager_.can_allocate(prompt);
    try {
      const int32_t cached = manager_.add_sequence(seq_id, prompt);
      ASSERT_EQ(cached % config_.block_size, 0);
      ASSERT_LE(cached, static_cast<int32_t>(prompt.size()));
      const std::vector<int64_t> slots = all_slots(seq_id);
      // A prefix hit must hand out blocks that already hold the requested tokens.
      for (int32_t t = 0; t < cached; ++t)
        ASSERT_EQ(device_slots_[slots[t]], prompt[t]) << "prefix hit, token " << t;
      for (size_t t = size_t(cached); t < prompt.size(); ++t) device_slots_[slots[t]] = prompt[t];
      coverage_.prefix_hit_tokens += cached;
      expected_[seq_id] = prompt;
    } catch (const Error& error) {
      ASSERT_EQ(error.code(), ErrorCode::out_of_memory) << error.what();
      EXPECT_NE(admission, AdmissionStatus::ok);
      EXPECT_FALSE(manager_.contains(seq_id));
      ++coverage_.refusals;
    }
  }

  std::map<uint64_t, std::vector<int32_t>> all_tables() {
    std::map<uint64_t, std::vector<int32_t>> tables;
    for (const auto& [seq_id, tokens] : expected_)
      tables[seq_id] = manager_.is_swapped(seq_id) ? manager_.host_block_table(seq_id)
                                                   : manager_.block_table(seq_id);
    return tables;
  }

  void append(uint64_t seq_id) {
    const int32_t token = uniform(0, 7);
    if (manager_.is_swapped(seq_id)) {
      EXPECT_FALSE(manager_.can_append(seq_id));
      EXPECT_THROW(manager_.append_token(seq_id, token), Error);
      return;
    }
    const bool can_append = manager_.can_append(seq_id);
    const int32_t free_before = manager_.num_free_blocks();
    const int32_t cached_before = manager_.num_cached_blocks();
    auto tables_before = all_tables();
    try {
      const AppendResult result = manager_.append_token(seq_id, token);
      EXPECT_TRUE(can_append);
      if (result.copy) {
        ASSERT_NE(result.copy->src, result.copy->dst);
        copy_block(device_slots_, result.copy->src, device_slots_, result.copy->dst);
        ++coverage_.copies_on_write;
      }
      device_slots_[result.slot] = token;
      auto& tokens = expected_[seq_id];
      tokens.push_back(token);
      const int32_t last = static_cast<int32_t>(tokens.size()) - 1;
      EXPECT_EQ(manager_.slot_mapping(seq_id, last, 1), std::vector<int64_t>{result.slot});
      if (free_before == 0 && manager_.num_cached_blocks() < cached_before) ++coverage_.evictions;
    } catch (const Error& error) {
      ASSERT_EQ(error.code(), ErrorCode::out_of_memory) << error.what();
      EXPECT_FALSE(can_append);
      ++coverage_.refusals;
    }
    // Only the appending sequence's table may change, and only in its last entries:
    // copy-on-write never moves another holder.
    auto tables_after = all_tables();
    std::vector<int32_t>& mine_before = tables_before[seq_id];
    const std::vector<int32_t>& mine_after = tables_after[seq_id];
    ASSERT_GE(mine_after.size(), mine_before.size());
    for (size_t i = 0; i + 1 < mine_before.size(); ++i) EXPECT_EQ(mine_before[i], mine_after[i]);
    tables_before.erase(seq_id);
    tables_after.erase(seq_id);
    EXPECT_EQ(tables_before, tables_after);
  }

  void fork(uint64_t parent_id) {
    const uint64_t child_id = next_id_++;
    manager_.fork(parent_id, child_id);
    expected_[child_id] = expected_[parent_id];
  }

  void free(uint64_t seq_id) {
    manager_.free_sequence(seq_id);
    expected_.erase(seq_id);
  }

  // Preempted sequences are requeued half of the time, under the same id, with all their
  // tokens as the prompt (recompute).
  void preempt(uint64_t seq_id) {
    const std::vector<int32_t> tokens = expected_[seq_id];
    EXPECT_EQ(manager_.preempt(seq_id), static_cast<int32_t>(tokens.size()));
    expected_.erase(seq_id);
    if (uniform(0, 1) == 1) add(seq_id, tokens);
  }

  void swap_out(const std::vector<uint64_t>& seq_ids) {
    const bool can_swap = manager_.can_swap_out(seq_ids);
    try {
      const std::vector<BlockCopy> copies = manager_.swap_out(seq_ids);
      EXPECT_TRUE(can_swap);
      apply_swap(copies, device_slots_, host_slots_);
    } catch (const Error& error) {
      ASSERT_EQ(error.code(), ErrorCode::out_of_memory) << error.what();
      EXPECT_FALSE(can_swap);
      ++coverage_.refusals;
    }
  }

  void swap_in(const std::vector<uint64_t>& seq_ids) {
    const AdmissionStatus admission = manager_.can_swap_in(seq_ids);
    try {
      const std::vector<BlockCopy> copies = manager_.swap_in(seq_ids);
      apply_swap(copies, host_slots_, device_slots_);
    } catch (const Error& error) {
      ASSERT_EQ(error.code(), ErrorCode::out_of_memory) << error.what();
      EXPECT_NE(admission, AdmissionStatus::ok);
      ++coverage_.refusals;
    }
  }

  // Each block moves once, however many sequences of the group hold it.
  void apply_swap(const std::vector<BlockCopy>& copies, const std::vector<int32_t>& from,
                  std::vector<int32_t>& to) {
    std::set<int32_t> sources, destinations;
    for (const BlockCopy& copy : copies) {
      EXPECT_TRUE(sources.insert(copy.src).second) << "block " << copy.src << " copied twice";
      EXPECT_TRUE(destinations.insert(copy.dst).second) << "block " << copy.dst << " written twice";
      copy_block(from, copy.src, to, copy.dst);
    }
    coverage_.swapped_blocks += static_cast<int>(copies.size());
  }

  void copy_block(const std::vector<int32_t>& from, int32_t src, std::vector<int32_t>& to,
                  int32_t dst) const {
    const int32_t size = config_.block_size;
    std::copy_n(from.begin() + src * size, size, to.begin() + dst * size);
  }

  // Reference counts recomputed from every table must equal the allocators' counts, and
  // every sequence must read back its tokens through its table.
  void check_invariants() {
    std::vector<int32_t> device_refs(kNumBlocks, 0);
    std::vector<int32_t> host_refs(size_t(config_.num_host_blocks), 0);
    for (const auto& [seq_id, tokens] : expected_) {
      ASSERT_TRUE(manager_.contains(seq_id));
      ASSERT_EQ(manager_.context_len(seq_id), static_cast<int32_t>(tokens.size()));
      const bool swapped = manager_.is_swapped(seq_id);
      const std::vector<int32_t> table =
          swapped ? manager_.host_block_table(seq_id) : manager_.block_table(seq_id);
      const int32_t size = config_.block_size;
      ASSERT_EQ(table.size(), (tokens.size() + size - 1) / size) << "sequence " << seq_id;
      const std::vector<int32_t>& slots = swapped ? host_slots_ : device_slots_;
      for (size_t t = 0; t < tokens.size(); ++t)
        ASSERT_EQ(slots[table[t / size] * size + t % size], tokens[t])
            << "sequence " << seq_id << " token " << t << (swapped ? " (swapped out)" : "");
      for (const int32_t block : table) ++(swapped ? host_refs : device_refs)[block];
    }
    check_counts(manager_.device_allocator(), device_refs);
    check_counts(manager_.host_allocator(), host_refs);

    const BlockUsage usage = manager_.usage();
    const auto in_use = static_cast<int32_t>(std::count_if(device_refs.begin(), device_refs.end(),
                                                           [](int32_t refs) { return refs > 0; }));
    EXPECT_EQ(usage.in_use, in_use);
    EXPECT_EQ(usage.free, manager_.num_free_blocks());
    EXPECT_EQ(usage.cached, manager_.num_cached_blocks());
    EXPECT_EQ(usage.in_use + usage.free + usage.cached, kNumBlocks);
    if (!config_.prefix_caching) {
      EXPECT_EQ(usage.cached, 0);
    }
  }

  static void check_counts(const BlockAllocator& allocator, const std::vector<int32_t>& refs) {
    int32_t unreferenced = 0;
    for (int32_t block = 0; block < allocator.num_blocks(); ++block) {
      ASSERT_EQ(allocator.ref_count(block), refs[block]) << "block " << block;
      ASSERT_EQ(allocator.is_free(block), refs[block] == 0) << "block " << block;
      unreferenced += refs[block] == 0;
    }
    ASSERT_EQ(allocator.num_free(), unreferenced);
  }

  SimulationConfig config_;
  BlockManager manager_;
  std::mt19937 rng_;
  std::map<uint64_t, std::vector<int32_t>> expected_;  // the tokens each live sequence was given
  std::vector<int32_t> device_slots_;                  // the token written in each slot
  std::vector<int32_t> host_slots_;
  std::vector<std::vector<int32_t>> prefixes_;
  uint64_t next_id_ = 1;
  Coverage coverage_;
};

class BlockManagerProperties : public ::testing::TestWithParam<SimulationConfig> {};

TEST_P(BlockManagerProperties, RandomOperationsKeepEveryInvariant) {
  const SimulationConfig& config = GetParam();
  Simulation simulation(config);
  simulation.run(kNumOperations);
  ASSERT_FALSE(HasFatalFailure());
  simulation.free_everything();

  const Coverage& coverage = simulation.coverage();
  EXPECT_GT(coverage.copies_on_write, 0);
  EXPECT_GT(coverage.refusals, 0);
  if (config.prefix_caching) {
    EXPECT_GT(coverage.prefix_hit_tokens, 0);
    EXPECT_GT(coverage.evictions, 0);
  }
  if (config.num_host_blocks > 0) {
    EXPECT_GT(coverage.swapped_blocks, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockManagerProperties,
                         ::testing::Values(SimulationConfig{.seed = 1}, SimulationConfig{.seed = 2},
                                           SimulationConfig{.seed = 3, .block_size = 2},
                                           SimulationConfig{.seed = 4, .block_size = 16},
                                           SimulationConfig{.seed = 5, .prefix_caching = false},
                                           SimulationConfig{.seed = 6, .num_host_blocks = 0}),
                         [](const auto& info) { return "seed" + std::to_string(info.param.seed); });

}  // namespace
}  // namespace vkpaged
