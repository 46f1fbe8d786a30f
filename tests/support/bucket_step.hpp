// SPDX-License-Identifier: Apache-2.0
#pragma once
// A step inside a bucket (AttentionPlan::create_bucket, MlaPlan::create_bucket), drawn for the
// replay tests: its own requests' new tokens, lengths, block tables and tree masks; written with
// the bucket's padding into the device arrays a recording reads; given to the CPU reference as
// the step's page tables.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "vkpaged/context.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

// What a bucket's steps may hold: B, the cache's N, M and the longest context.
struct BucketLimits {
  uint32_t block_size = 16, num_blocks = 0, max_blocks_per_seq = 0, max_context = 0;
};

// One step inside the bucket: its own requests (the padding is the replay's).
struct BucketStep {
  std::vector<uint32_t> new_tokens, lens;
  std::vector<int32_t> tables;     // [S', M]
  std::vector<uint8_t> tree_mask;  // the requests' q_s x q_s masks, one after another
  uint32_t tokens() const;
};

// A step of `requests` requests sharing `tokens` new tokens, each at most `max_query`: the first
// request's context is the bucket's longest, the next four's the ragged edges 1, B - 1, B and
// B + 1 (at least their own tokens), the rest drawn; tables drawn over the whole cache.
BucketStep random_bucket_step(std::mt19937& rng, const BucketLimits& limits, uint32_t requests, uint32_t tokens,
                              uint32_t max_query, bool tree_mask);

// The host-visible page-table arrays of a bucket of S requests (i32 block tables [S, M], lengths
// [S], query starts [S + 1], the tree masks' bytes in whole words) and its status word (zeroed),
// which the host rewrites before each replay.
class BucketPageTables {
 public:
  BucketPageTables(Context& ctx, uint32_t requests, const BucketLimits& limits, size_t tree_mask_bytes);

  // The step's requests, then padding requests of no new tokens and length 0.
  void write(const BucketStep& step);

  TensorView block_tables() const;
  TensorView context_lens() const;
  TensorView query_starts() const;
  TensorView tree_mask() const;  // its range whole 32-bit words
  BufferView status() const { return status_.view(); }
  uint32_t status_flags() const;

 private:
  uint32_t S_;
  BucketLimits limits_;
  size_t tree_mask_bytes_;
  DeviceBuffer tables_, lens_, starts_, tree_mask_, status_;
};

// The step's own page tables, query starts and tree masks as the CPU reference takes them
// (AttentionInputs' and MlaInputs' fields of those names).
template <typename Inputs>
void set_reference_page_tables(Inputs& in, const BucketStep& step, const BucketLimits& limits) {
  const int64_t n = int64_t(step.new_tokens.size());
  in.block_tables = HostTensor(DType::i32, Shape{n, limits.max_blocks_per_seq});
  std::memcpy(in.block_tables.data(), step.tables.data(), in.block_tables.bytes());
  in.context_lens = HostTensor(DType::i32, Shape{n});
  in.query_starts = HostTensor(DType::i32, Shape{n + 1});
  in.query_starts.template as<int32_t>()[0] = 0;
  for (int64_t r = 0; r < n; ++r) {
    in.context_lens.template as<int32_t>()[r] = int32_t(step.lens[size_t(r)]);
    in.query_starts.template as<int32_t>()[r + 1] =
        in.query_starts.template as<int32_t>()[r] + int32_t(step.new_tokens[size_t(r)]);
  }
  if (!step.tree_mask.empty()) {
    in.tree_mask = HostTensor(DType::u8, Shape{int64_t(step.tree_mask.size())});
    std::memcpy(in.tree_mask.data(), step.tree_mask.data(), step.tree_mask.size());
  }
}

}  // namespace vkpaged::test
