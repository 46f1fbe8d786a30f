// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/fragment_layout.comp: the fragment layout decode_coopmat_kernel.glsl assumes,
// checked against what the device does. VK_NV_cooperative_matrix leaves the mapping of a
// fragment's components to matrix elements to the implementation; the matrix kernel writes
// components straight from 16-byte cache loads, so it runs only where the mapping is the one
// below (NVIDIA's, with lane = 4 g + q).
#include "ops/fragment_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <mutex>
#include <optional>
#include <vector>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "vk/context_impl.hpp"
#include "vk/matrix_features.hpp"

namespace vkpaged::detail {
namespace {

constexpr uint32_t kSlots = FRAGMENT_SLOTS;
constexpr uint32_t kLanes = 32;

std::string compare(const std::vector<uint32_t>& codes) {
  const std::array<uint32_t, 3> lengths{8, 4, 4};
  const std::array<const char*, 3> names{"A [16 x 16]", "B [16 x 8]", "accumulator [16 x 8]"};
  std::vector<std::string> differences;
  for (uint32_t f = 0; f < 3; ++f) {
    const uint32_t got = codes[96 * kSlots + f];
    if (got != lengths[f]) {
      differences.push_back(fmt::format("fragment {} has {} components per lane, not {}", names[f], got, lengths[f]));
      continue;
    }
    bool found = false;  // the first differing lane of each fragment is enough
    for (uint32_t lane = 0; lane < kLanes && !found; ++lane)
      for (uint32_t i = 0; i < lengths[f] && !found; ++i) {
        const uint32_t want = f == 0 ? nv_fragment_code_a(lane, i) : nv_fragment_code_b(lane, i);
        if (codes[(f * kLanes + lane) * kSlots + i] == want) continue;
        std::vector<uint32_t> held(lengths[f]);
        for (uint32_t j = 0; j < lengths[f]; ++j) held[j] = codes[(f * kLanes + lane) * kSlots + j];
        differences.push_back(fmt::format("fragment {}: lane {} holds element codes {} (row * columns + column), the "
                                          "matrix kernel expects {} at component {}",
                                          names[f], lane, fmt::join(held, " "), want, i));
        found = true;
      }
  }
  return fmt::format("{}", fmt::join(differences, "; "));
}

// The probe's answer, kept per context (vk/operator_state.hpp): "" when the layout holds.
struct FragmentLayoutState {
  std::mutex mutex;  // held while the probe runs, so that it runs once
  std::optional<std::string> mismatch;
};

}  // namespace

const std::string& matrix_fragment_mismatch(Context& context) {
  auto& impl = context.impl();
  auto& state = impl.operator_states.get<FragmentLayoutState>();
  std::lock_guard lock(state.mutex);
  if (state.mismatch) return *state.mismatch;
  // The probe is a matrix module itself: it runs only where such modules are valid.
  if (const std::string missing = missing_matrix_features(impl); !missing.empty() || !impl.cooperative_matrix) {
    state.mismatch = missing.empty() ? "VK_NV_cooperative_matrix is not enabled" : missing;
    return *state.mismatch;
  }
  const size_t words = 96 * kSlots + 3;
  DeviceBuffer out = context.create_buffer(words * 4);
  const auto& pipeline = impl.pipeline(vk::shader_fragment_layout(), {}, 1, 0);
  const std::array<BoundView, 1> bound{impl.bind_view(out.view())};
  context.run_and_wait([&](VkCommandBuffer cmd) { impl.dispatch(cmd, pipeline, bound, nullptr, 1, 1, 1); });
  std::vector<uint32_t> codes(words);
  context.download(out.view(), codes.data(), words * 4);
  state.mismatch = compare(codes);
  return *state.mismatch;
}

}  // namespace vkpaged::detail
