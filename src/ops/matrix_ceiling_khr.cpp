// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/matrix_ceiling_khr.comp: the product shape and the grid, the timing, and
// the check of the products' result.
#include "ops/matrix_ceiling_khr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "embedded_shaders.hpp"
#include "vk/context_impl.hpp"
#include "vk/matrix_features.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

constexpr uint32_t kIterations = 1024;       // per subgroup, four products each
constexpr uint32_t kSubgroupsPerWorkgroup = 4;  // as coopmat-probe's 128 invocations on NVIDIA
constexpr uint32_t kSlots = 64;              // result slots (matrix_ceiling_khr.comp)
constexpr uint32_t kMaxWorkgroups = 65535;   // maxComputeWorkGroupCount[0]'s guaranteed minimum
constexpr double kMinDispatchNs = 10e6;      // long enough that the last wave's tail weighs little
constexpr uint16_t kF16One = 0x3c00;

// Why the shader cannot run here ("" when it can); `product` is set where it can.
std::string why_not(const ContextImpl& impl, const vk::ShaderRegistration& shader, MatrixProductShape& product) {
  if (std::string missing = missing_khr_matrix_features(impl); !missing.empty()) return missing;
  if (shader.words == 0)
    return fmt::format("vkpaged was built without a GLSL compiler that knows GL_KHR_cooperative_matrix "
                       "(shaders/{}.comp is left out)",
                       shader.name);
  if (!impl.info.timestamps) return fmt::format("device {} has no compute timestamps", impl.info.name);
  const auto products = impl.capabilities.f16_products();
  if (products.empty())
    return fmt::format("device {} lists no f16 x f16 + f32 product at subgroup scope", impl.info.name);
  // The largest product: the fewest instructions per FLOP, as the attention matrix kernel takes.
  product = *std::max_element(products.begin(), products.end(), [](const auto& a, const auto& b) {
    return uint64_t(a.m) * a.n * a.k < uint64_t(b.m) * b.n * b.k;
  });
  if (impl.max_subgroup_size == 0 || uint64_t(impl.max_subgroup_size) * kSubgroupsPerWorkgroup >
                                         impl.info.max_workgroup_invocations)
    return fmt::format("device {}: {} subgroups of {} invocations exceed maxComputeWorkGroupInvocations {}",
                       impl.info.name, kSubgroupsPerWorkgroup, impl.max_subgroup_size,
                       impl.info.max_workgroup_invocations);
  return "";
}

}  // namespace

std::string MatrixCeiling::describe() const {
  if (!unavailable.empty()) return unavailable;
  return fmt::format("{}x{}x{} f16 x f16 + f32 products, {} workgroups of {} x {} invocations, {} x 4 products per "
                     "subgroup, {:.1f} ms per dispatch",
                     m, n, k, workgroups, subgroups_per_workgroup, subgroup_size, iterations, median_ns * 1e-6);
}

MatrixCeiling measure_matrix_ceiling_khr(Context& context, int repetitions) {
  auto& impl = context.impl();
  const auto& shader = vk::shader_matrix_ceiling_khr();
  MatrixCeiling c;
  MatrixProductShape product;
  c.unavailable = why_not(impl, shader, product);
  if (!c.unavailable.empty()) return c;
  c.m = product.m;
  c.n = product.n;
  c.k = product.k;
  c.subgroups_per_workgroup = kSubgroupsPerWorkgroup;
  c.subgroup_size = impl.max_subgroup_size;
  c.iterations = kIterations;

  const std::vector<uint16_t> ones(size_t(c.m) * c.k + size_t(c.k) * c.n, kF16One);
  DeviceBuffer a_and_b = context.create_buffer(ones.size() * 2);
  DeviceBuffer result = context.create_buffer(size_t(kSlots) * c.m * c.n * 4);
  DeviceBuffer status = context.create_buffer(16);
  context.upload(a_and_b.view(), ones.data(), ones.size() * 2);
  const std::array<uint32_t, 4> zero{};
  context.upload(status.view(), zero.data(), sizeof zero);

  const std::array<uint32_t, 6> spec{c.subgroups_per_workgroup * c.subgroup_size, c.m, c.n, c.k, c.iterations, kSlots};
  const auto& pipeline = impl.pipeline(shader, spec, 3, 0);
  const std::array<BoundView, 3> bound{impl.bind_view(a_and_b.view()), impl.bind_view(result.view()),
                                       impl.bind_view(status.view(0, 4))};
  auto time_grid = [&](uint32_t workgroups) {
    return context.run_and_time([&](VkCommandBuffer cmd) { impl.dispatch(cmd, pipeline, bound, nullptr, workgroups, 1, 1); });
  };

  // Double the grid until a dispatch is long and covers every compute unit twice over.
  const uint32_t min_workgroups = std::min(kMaxWorkgroups, 2 * std::max(1u, impl.info.compute_units));
  uint32_t workgroups = 1;
  time_grid(workgroups);  // the pipeline's first dispatch, untimed
  for (double ns = time_grid(workgroups); workgroups < kMaxWorkgroups && (ns < kMinDispatchNs || workgroups < min_workgroups);
       ns = time_grid(workgroups))
    workgroups = std::min(kMaxWorkgroups, workgroups * 2);
  c.workgroups = workgroups;
  c.flops = 2.0 * c.m * c.n * c.k * 4.0 * c.iterations * double(workgroups) * c.subgroups_per_workgroup;

  for (int i = 0; i < 3; ++i) time_grid(workgroups);
  std::vector<double> ns;
  for (int i = 0; i < std::max(1, repetitions); ++i) ns.push_back(time_grid(workgroups));
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  c.median_ns = ns[ns.size() / 2];

  // Every invocation compared its accumulators with 4 * ITER * K; the slots written must hold it too.
  uint32_t wrong = 0;
  context.download(status.view(0, 4), &wrong, 4);
  const uint64_t written = std::min<uint64_t>(kSlots, uint64_t(workgroups) * c.subgroups_per_workgroup);
  std::vector<float> got(size_t(written) * c.m * c.n);
  context.download(result.view(), got.data(), got.size() * 4);
  const float expected = float(4u * c.iterations * c.k);
  const auto bad = std::find_if(got.begin(), got.end(), [&](float x) { return x != expected; });
  if (wrong != 0 || bad != got.end())
    throw Error(ErrorCode::internal,
                fmt::format("matrix ceiling: the {}x{}x{} products gave wrong results on device {} ({} invocations "
                            "flagged; result element {} is {}, expected {})",
                            c.m, c.n, c.k, impl.info.name, wrong, bad == got.end() ? -1 : bad - got.begin(),
                            bad == got.end() ? expected : *bad, expected));
  return c;
}

}  // namespace vkpaged::detail
