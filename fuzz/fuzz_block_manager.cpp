// SPDX-License-Identifier: Apache-2.0
// BlockManager under operation sequences read from the bytes: construction with any
// arguments, then add, append, fork, free, preempt, swap out/in and every query, on known and
// unknown sequence ids. A model beside it knows the tokens of each live sequence and the token
// in every device and host slot (writing the slots and applying the copy-on-write and swap
// copies as an engine would). After each operation:
//   - reference counts recomputed from every block table equal the allocators' counts, and
//     in_use + free + cached == num_blocks;
//   - every sequence reads back exactly its tokens through its table;
//   - a refused call is vkpaged::Error and changed nothing; invalid_argument exactly when the
//     call names an unknown or duplicate sequence or one on the wrong side of a swap,
//     out_of_memory only when the matching can_* query had said no.
// (The same checks as tests/cache/test_block_manager_properties.cpp, whose checker is written
// against GoogleTest and so is not reused here.)
#include <algorithm>
#include <map>
#include <set>

#include "fuzz_support.hpp"
#include "ops/block_size_rule.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::fuzz {
namespace {

constexpr int32_t kUnwritten = -1;
constexpr int kMaxOperations = 256;

std::string str(uint64_t v) { return std::to_string(v); }

// What a refusal must leave as it was.
struct Snapshot {
  BlockUsage usage;
  std::vector<int32_t> device_refs, host_refs;
  std::map<uint64_t, std::pair<bool, std::vector<int32_t>>> tables;
  bool operator==(const Snapshot& o) const {
    return usage.in_use == o.usage.in_use && usage.free == o.usage.free && usage.cached == o.usage.cached &&
           usage.host_in_use == o.usage.host_in_use && device_refs == o.device_refs && host_refs == o.host_refs &&
           tables == o.tables;
  }
};

class Harness {
 public:
  Harness(FuzzedDataProvider& p, BlockManager manager, int32_t num_host_blocks)
      : p_(p),
        m_(std::move(manager)),
        B_(m_.block_size()),
        N_(m_.device_allocator().num_blocks()),
        device_slots_(size_t(N_) * size_t(B_), kUnwritten),
        host_slots_(size_t(num_host_blocks) * size_t(B_), kUnwritten) {}

  void run() {
    for (int step = 0; step < kMaxOperations && p_.remaining_bytes() > 0; ++step) {
      switch (p_.ConsumeIntegralInRange<int>(0, 9)) {
        case 0: case 1: add(); break;
        case 2: case 3: append(); break;
        case 4: fork(); break;
        case 5: free_or_preempt(); break;
        case 6: swap(false); break;
        case 7: swap(true); break;
        default: queries(); break;
      }
      check_invariants();
    }
    for (const auto& [id, tokens] : std::map(expected_)) m_.free_sequence(id);
    expected_.clear();
    check_invariants();
    FUZZ_CHECK(m_.usage().in_use == 0 && m_.host_allocator().num_free() == m_.host_allocator().num_blocks(),
               "blocks still in use after every sequence was freed");
  }

 private:
  // Mostly live sequences, sometimes an id never used or one that was freed.
  uint64_t pick_id() {
    if (!expected_.empty() && p_.ConsumeIntegralInRange<int>(0, 7) != 0) {
      auto it = expected_.begin();
      std::advance(it, p_.ConsumeIntegralInRange<size_t>(0, expected_.size() - 1));
      return it->first;
    }
    return p_.ConsumeIntegralInRange<uint64_t>(0, 20);
  }
  int32_t pick_token() {
    return p_.ConsumeIntegralInRange<int>(0, 15) == 0 ? p_.ConsumeIntegral<int32_t>()
                                                      : p_.ConsumeIntegralInRange<int32_t>(0, 3);
  }
  std::vector<int32_t> pick_prompt() {
    std::vector<int32_t> prompt(p_.ConsumeIntegralInRange<size_t>(0, size_t(3 * B_ + 2)));
    const bool repeat = p_.ConsumeBool();  // few distinct prompts: prefix hits
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = repeat ? int32_t(i % 3) : pick_token();
    return prompt;
  }
  std::vector<uint64_t> pick_group() {
    std::vector<uint64_t> ids(p_.ConsumeIntegralInRange<size_t>(0, 3));
    for (auto& id : ids) id = pick_id();
    return ids;
  }
  bool known(uint64_t id) const { return expected_.contains(id); }
  bool swapped(uint64_t id) const { return m_.is_swapped(id); }

  Snapshot snapshot() const {
    Snapshot s;
    s.usage = m_.usage();
    for (int32_t b = 0; b < N_; ++b) s.device_refs.push_back(m_.device_allocator().ref_count(b));
    for (int32_t b = 0; b < m_.host_allocator().num_blocks(); ++b) s.host_refs.push_back(m_.host_allocator().ref_count(b));
    for (const auto& [id, tokens] : expected_)
      s.tables[id] = {swapped(id), swapped(id) ? m_.host_block_table(id) : m_.block_table(id)};
    return s;
  }

  // Runs a mutating call. `invalid`: the model says its arguments are wrong. `can`: what the
  // matching can_* query said (true where there is none). Returns whether it succeeded.
  template <typename F>
  bool attempt(const char* what, bool invalid, bool can, F&& call) {
    const Snapshot before = snapshot();
    try {
      call();
    } catch (const Error& e) {
      FUZZ_CHECK(snapshot() == before, std::string(what) + " was refused but changed the manager: " + e.what());
      if (e.code() == ErrorCode::invalid_argument) {
        FUZZ_CHECK(invalid, std::string(what) + " refused valid arguments: " + e.what());
      } else {
        FUZZ_CHECK(e.code() == ErrorCode::out_of_memory, std::string(what) + ": unexpected error " + e.what());
        FUZZ_CHECK(!invalid, std::string(what) + " refused invalid arguments as out_of_memory: " + e.what());
        FUZZ_CHECK(!can, std::string(what) + " ran out of blocks after its can_* query said yes: " + e.what());
      }
      return false;
    }
    FUZZ_CHECK(!invalid, std::string(what) + " accepted invalid arguments");
    return true;
  }

  void copy_block(const std::vector<int32_t>& from, int32_t src, std::vector<int32_t>& to, int32_t dst) const {
    std::copy_n(from.begin() + ptrdiff_t(src) * B_, B_, to.begin() + ptrdiff_t(dst) * B_);
  }

  void add() {
    const uint64_t id = pick_id();
    const std::vector<int32_t> prompt = pick_prompt();
    const AdmissionStatus admission = m_.can_allocate(prompt);
    int32_t cached = 0;
    // "ok" promises success; add_sequence itself does not apply the watermark.
    if (!attempt("add_sequence", known(id), admission == AdmissionStatus::ok,
                 [&] { cached = m_.add_sequence(id, prompt); })) {
      FUZZ_CHECK(known(id) == m_.contains(id), "refused add_sequence " + str(id) + " left it half added");
      return;
    }
    FUZZ_CHECK(cached >= 0 && cached % B_ == 0 && size_t(cached) <= prompt.size(), "cached " + std::to_string(cached));
    const auto slots = m_.slot_mapping(id, 0, int32_t(prompt.size()));
    for (size_t t = 0; t < prompt.size(); ++t) {
      if (t < size_t(cached))
        FUZZ_CHECK(device_slots_[size_t(slots[t])] == prompt[t], "prefix hit on a block not holding token " + str(t));
      else
        device_slots_[size_t(slots[t])] = prompt[t];
    }
    expected_[id] = prompt;
  }

  void append() {
    const uint64_t id = pick_id();
    const int32_t token = pick_token();
    const bool invalid = !known(id) || swapped(id);
    const bool can = !invalid && m_.can_append(id);
    AppendResult r;
    if (!attempt("append_token", invalid, can, [&] { r = m_.append_token(id, token); })) return;
    FUZZ_CHECK(can, "append_token succeeded after can_append said no");
    if (r.copy) {
      FUZZ_CHECK(r.copy->src != r.copy->dst, "copy-on-write onto itself");
      copy_block(device_slots_, r.copy->src, device_slots_, r.copy->dst);
    }
    FUZZ_CHECK(r.slot >= 0 && r.slot < int64_t(N_) * B_, "slot " + std::to_string(r.slot));
    device_slots_[size_t(r.slot)] = token;
    auto& tokens = expected_[id];
    tokens.push_back(token);
    FUZZ_CHECK(m_.slot_mapping(id, int32_t(tokens.size()) - 1, 1) == std::vector<int64_t>{r.slot}, "slot_mapping of the append");
  }

  void fork() {
    const uint64_t parent = pick_id(), child = p_.ConsumeBool() ? pick_id() : p_.ConsumeIntegralInRange<uint64_t>(0, 40);
    if (!attempt("fork", !known(parent) || known(child), true, [&] { m_.fork(parent, child); })) return;
    expected_[child] = expected_[parent];
  }

  void free_or_preempt() {
    const uint64_t id = pick_id();
    if (p_.ConsumeBool()) {
      if (attempt("free_sequence", !known(id), true, [&] { m_.free_sequence(id); })) expected_.erase(id);
      return;
    }
    int32_t len = -1;
    if (!attempt("preempt", !known(id), true, [&] { len = m_.preempt(id); })) return;
    FUZZ_CHECK(size_t(len) == expected_[id].size(), "preempt returned " + std::to_string(len));
    expected_.erase(id);
  }

  void swap(bool in) {
    const std::vector<uint64_t> ids = pick_group();
    std::set<uint64_t> seen;
    bool invalid = false;
    for (uint64_t id : ids) invalid = invalid || !known(id) || !seen.insert(id).second || swapped(id) != in;
    bool can = true;
    if (!invalid) can = in ? m_.can_swap_in(ids) == AdmissionStatus::ok : m_.can_swap_out(ids);
    std::vector<BlockCopy> copies;
    if (!attempt(in ? "swap_in" : "swap_out", invalid, can, [&] { copies = in ? m_.swap_in(ids) : m_.swap_out(ids); }))
      return;
    if (!in) FUZZ_CHECK(can, "swap_out succeeded after can_swap_out said no");
    std::set<int32_t> sources, destinations;
    for (const BlockCopy& c : copies) {
      FUZZ_CHECK(sources.insert(c.src).second && destinations.insert(c.dst).second, "a block moved twice");
      if (in) copy_block(host_slots_, c.src, device_slots_, c.dst);
      else copy_block(device_slots_, c.src, host_slots_, c.dst);
    }
  }

  // Read-only calls: any arguments, only vkpaged::Error, and nothing changes.
  void queries() {
    const Snapshot before = snapshot();
    const uint64_t id = pick_id();
    // a: a token index or a table width; b: a token count. Widths stay below 2^16 because
    // block_table and build_batch allocate what the width asks for (build_batch even before
    // it checks the sequences: docs/reliability.md, "Known issues").
    const int32_t a = p_.ConsumeIntegralInRange<int>(0, 3) == 0 ? p_.ConsumeIntegralInRange<int32_t>(INT32_MIN, 1 << 16)
                                                                : p_.ConsumeIntegralInRange<int32_t>(-2, 3 * B_ + 4);
    const int32_t b = p_.ConsumeIntegralInRange<int>(0, 3) == 0 ? p_.ConsumeIntegral<int32_t>()
                                                                : p_.ConsumeIntegralInRange<int32_t>(-2, 3 * B_ + 4);
    try {
      switch (p_.ConsumeIntegralInRange<int>(0, 6)) {
        case 0: {
          const auto slots = m_.slot_mapping(id, a, b);
          FUZZ_CHECK(slots.size() == size_t(b), "slot_mapping size");
          for (int64_t s : slots) FUZZ_CHECK(s >= 0 && s < int64_t(N_) * B_, "slot " + std::to_string(s));
          break;
        }
        case 1: {
          const auto table = m_.block_table(id, a);
          FUZZ_CHECK(table.size() == size_t(a), "padded table size");
          break;
        }
        case 2: {
          const auto ids = pick_group();
          const BatchArrays batch = m_.build_batch(ids, a);
          FUZZ_CHECK(batch.block_tables.size() == ids.size() * size_t(a) && batch.context_lens.size() == ids.size(),
                     "batch sizes");
          for (size_t r = 0; r < ids.size(); ++r)
            FUZZ_CHECK(size_t(batch.context_lens[r]) == expected_.at(ids[r]).size(), "batch context length");
          break;
        }
        case 3: (void)m_.can_allocate(pick_prompt()); break;
        case 4: (void)m_.can_append(id); break;
        case 5: (void)m_.host_block_table(id); break;
        default: {
          const auto ids = pick_group();
          (void)m_.can_swap_out(ids);
          (void)m_.can_swap_in(ids);
          break;
        }
      }
    } catch (const Error&) {
    }
    FUZZ_CHECK(snapshot() == before, "a query changed the manager");
  }

  // Reference counts from the tables; every sequence reads back its tokens.
  void check_invariants() const {
    std::vector<int32_t> device_refs(size_t(N_), 0), host_refs(size_t(m_.host_allocator().num_blocks()), 0);
    for (const auto& [id, tokens] : expected_) {
      FUZZ_CHECK(m_.contains(id), "sequence " + str(id) + " vanished");
      FUZZ_CHECK(size_t(m_.context_len(id)) == tokens.size(), "context_len of " + str(id));
      const bool out = m_.is_swapped(id);
      const auto table = out ? m_.host_block_table(id) : m_.block_table(id);
      FUZZ_CHECK(table.size() == (tokens.size() + size_t(B_) - 1) / size_t(B_), "table size of " + str(id));
      const auto& slots = out ? host_slots_ : device_slots_;
      auto& refs = out ? host_refs : device_refs;
      for (size_t t = 0; t < tokens.size(); ++t) {
        const int32_t block = table[t / size_t(B_)];
        FUZZ_CHECK(block >= 0 && size_t(block) < refs.size(), "block id " + std::to_string(block));
        FUZZ_CHECK(slots[size_t(block) * size_t(B_) + t % size_t(B_)] == tokens[t],
                   "sequence " + str(id) + " token " + str(t) + (out ? " (swapped out)" : ""));
      }
      for (int32_t block : table) ++refs[size_t(block)];
    }
    for (int32_t b = 0; b < N_; ++b)
      FUZZ_CHECK(m_.device_allocator().ref_count(b) == device_refs[size_t(b)], "device block " + str(b) + " count");
    for (size_t b = 0; b < host_refs.size(); ++b)
      FUZZ_CHECK(m_.host_allocator().ref_count(int32_t(b)) == host_refs[b], "host block " + str(b) + " count");
    const BlockUsage u = m_.usage();
    const auto in_use = int32_t(std::count_if(device_refs.begin(), device_refs.end(), [](int32_t r) { return r > 0; }));
    FUZZ_CHECK(u.in_use == in_use && u.in_use + u.free + u.cached == N_ && u.free >= 0 && u.cached >= 0,
               "usage " + std::to_string(u.in_use) + " + " + std::to_string(u.free) + " + " + std::to_string(u.cached));
  }

  FuzzedDataProvider& p_;
  BlockManager m_;
  const int32_t B_, N_;
  std::map<uint64_t, std::vector<int32_t>> expected_;
  std::vector<int32_t> device_slots_, host_slots_;
};

int run(FuzzedDataProvider& p) {
  static constexpr double kWatermarks[] = {0.0, 0.01, 0.1, 0.5, 0.99, 1.0, -0.1, std::numeric_limits<double>::quiet_NaN()};
  const int32_t num_blocks = p.ConsumeIntegralInRange<int>(0, 15) == 0 ? p.ConsumeIntegralInRange<int32_t>(-2, 0)
                                                                      : p.ConsumeIntegralInRange<int32_t>(1, 24);
  // Mostly the block sizes decode takes (1, 2, 4, 8), sometimes any from -2 to 8.
  const int32_t block_size = p.ConsumeIntegralInRange<int>(0, 7) == 0 ? p.ConsumeIntegralInRange<int32_t>(-2, 8)
                                                                     : int32_t(1) << p.ConsumeIntegralInRange<int>(0, 3);
  BlockManagerOptions o;
  o.watermark = kWatermarks[p.ConsumeIntegralInRange<size_t>(0, std::size(kWatermarks) - 1)];
  o.enable_prefix_caching = p.ConsumeBool();
  o.hash_salt = p.ConsumeIntegral<uint8_t>();
  o.num_host_blocks = p.ConsumeIntegralInRange<int32_t>(-1, 16);
  std::optional<BlockManager> manager;
  try {
    manager.emplace(num_blocks, block_size, o);
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == ErrorCode::invalid_argument, e.what());
    return 0;
  }
  FUZZ_CHECK(num_blocks > 0 && detail::is_supported_block_size(block_size) && o.watermark >= 0.0 && o.watermark < 1.0 && o.num_host_blocks >= 0,
             "BlockManager accepted num_blocks " + std::to_string(num_blocks) + ", block_size " +
                 std::to_string(block_size) + ", watermark " + std::to_string(o.watermark));
  Harness(p, std::move(*manager), o.num_host_blocks).run();
  return 0;
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  return vkpaged::fuzz::run(p);
}
