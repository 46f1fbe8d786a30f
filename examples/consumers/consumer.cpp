// SPDX-License-Identifier: Apache-2.0
// A tiny C++ consumer of vkpaged, built by scripts/examples.sh through find_package of the
// installed package, add_subdirectory of the source tree and FetchContent from the local path,
// on the compiler's default C++ standard (the vkpaged targets ask for C++17 at least), and as
// C++17 and C++20 (examples/consumers/cxx_standard, which checks it got that standard). It schedules three
// sequences with the BlockManager, decodes them on the default Vulkan device and checks the
// result against the CPU reference. One line out; exit status 1 on a mismatch or an error.
#include <vkpaged/block_manager.hpp>
#include <vkpaged/context.hpp>
#include <vkpaged/decode.hpp>
#include <vkpaged/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#ifndef VKPAGED_CONSUMER
#define VKPAGED_CONSUMER "consumer"
#endif
#ifdef VKPAGED_CONSUMER_CPLUSPLUS
static_assert(__cplusplus == VKPAGED_CONSUMER_CPLUSPLUS, "built on another C++ standard than the one asked for");
#endif

int main() try {
  constexpr int32_t kBlocks = 16, kBlockSize = 16, kHeads = 4, kKvHeads = 2, kHeadSize = 64;
  const std::vector<int32_t> prompt_lens = {5, 16, 37};
  const int64_t S = int64_t(prompt_lens.size());

  vkpaged::BlockManager manager(kBlocks, kBlockSize);
  std::vector<uint64_t> ids;
  int32_t token = 0;
  for (size_t s = 0; s < prompt_lens.size(); ++s) {
    std::vector<int32_t> prompt(size_t(prompt_lens[s]));
    for (auto& t : prompt) t = token++;  // distinct tokens: no prefix-cache sharing
    manager.add_sequence(s, prompt);
    ids.push_back(s);
  }
  const int32_t width = (*std::max_element(prompt_lens.begin(), prompt_lens.end()) + kBlockSize - 1) / kBlockSize;
  const vkpaged::BatchArrays batch = manager.build_batch(ids, width);

  using vkpaged::DType;
  using vkpaged::HostTensor;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random = [&](DType dtype, vkpaged::Shape shape) {
    HostTensor t(dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(size_t(i), uniform(rng));
    return t;
  };
  const int64_t x = vkpaged::cache_pack_factor(DType::f32);
  vkpaged::DecodeInputs in;
  in.cache_dtype = DType::f32;
  in.query = random(DType::f32, {S, kHeads, kHeadSize});
  in.key_cache = random(DType::f32, {kBlocks, kKvHeads, kHeadSize / x, kBlockSize, x});
  in.value_cache = random(DType::f32, {kBlocks, kKvHeads, kHeadSize, kBlockSize});
  in.block_tables = HostTensor(DType::i32, {S, width});
  std::copy(batch.block_tables.begin(), batch.block_tables.end(), in.block_tables.as<int32_t>());
  in.context_lens = HostTensor(DType::i32, {S});
  std::copy(batch.context_lens.begin(), batch.context_lens.end(), in.context_lens.as<int32_t>());

  vkpaged::Context context;
  const vkpaged::DecodeResult got = vkpaged::decode_attention(context, in);
  const vkpaged::DecodeResult want = vkpaged::reference::decode_attention(in);
  double max_diff = 0.0;
  for (int64_t i = 0; i < want.output.numel(); ++i)
    max_diff = std::max(max_diff, std::fabs(got.output.get(size_t(i)) - want.output.get(size_t(i))));
  const bool ok = max_diff <= 1e-4;
  std::printf("vkpaged %s: %lld sequences on %s (%d of %d blocks in use): decode %s the CPU reference (max |diff| %.1e)\n",
              VKPAGED_CONSUMER, static_cast<long long>(S), context.device_info().name.c_str(), manager.usage().in_use,
              kBlocks, ok ? "matches" : "DIFFERS FROM", max_diff);
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "vkpaged %s: %s\n", VKPAGED_CONSUMER, e.what());
  return 1;
}
