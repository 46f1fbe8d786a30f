// SPDX-License-Identifier: Apache-2.0
// The context's pipeline registry: pipelines found by their request's key or built once, one at
// a time as plans and records ask (ContextImpl::pipeline), or many at once on several threads
// (ContextImpl::prepare_pipelines, Context::prepare).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <thread>

#include "vk/check.hpp"
#include "vk/context_impl.hpp"
#include "vk/pipeline_statistics.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace vk {

std::string PipelineRequest::key() const {
  std::string key = shader->name;
  for (uint32_t v : spec) key += fmt::format(":{}", v);
  return key;
}

}  // namespace vk

namespace detail {

std::unique_ptr<ComputePipeline> ContextImpl::build_pipeline(const vk::PipelineRequest& r) {
  const vk::ShaderRegistration& shader = *r.shader;
  if (shader.words == 0)
    throw Error(ErrorCode::unsupported,
                fmt::format("shader {}: vkpaged was built without a GLSL compiler that knows GL_KHR_cooperative_matrix "
                            "(cmake -DVKPAGED_KHR_SHADERS=ON after scripts/install-deps.sh)",
                            shader.name));
  auto p = std::make_unique<ComputePipeline>();
  p->num_bindings = r.num_bindings;
  p->push_bytes = r.push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> bindings(r.num_bindings);
  for (uint32_t i = 0; i < r.num_bindings; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo slinfo{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  slinfo.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  slinfo.bindingCount = r.num_bindings;
  slinfo.pBindings = bindings.data();
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  vk::check(d.vkCreateDescriptorSetLayout(device, &slinfo, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  p->set_layout = vk::UniqueDescriptorSetLayout(&d, device, set_layout);

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, r.push_bytes};
  VkPipelineLayoutCreateInfo plinfo{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plinfo.setLayoutCount = 1;
  plinfo.pSetLayouts = &set_layout;
  plinfo.pushConstantRangeCount = r.push_bytes ? 1 : 0;
  plinfo.pPushConstantRanges = &range;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  vk::check(d.vkCreatePipelineLayout(device, &plinfo, nullptr, &layout), "vkCreatePipelineLayout");
  p->layout = vk::UniquePipelineLayout(&d, device, layout);

  VkShaderModuleCreateInfo minfo{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  minfo.codeSize = shader.words * 4;
  minfo.pCode = shader.code;
  VkShaderModule module = VK_NULL_HANDLE;
  vk::check(d.vkCreateShaderModule(device, &minfo, nullptr, &module), "vkCreateShaderModule");
  vk::UniqueShaderModule module_owner(&d, device, module);

  std::vector<VkSpecializationMapEntry> entries(r.spec.size());
  for (uint32_t i = 0; i < r.spec.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo sinfo{uint32_t(entries.size()), entries.data(), r.spec.size() * 4, r.spec.data()};
  VkComputePipelineCreateInfo cinfo{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cinfo.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cinfo.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cinfo.stage.module = module;
  cinfo.stage.pName = "main";
  cinfo.stage.pSpecializationInfo = r.spec.empty() ? nullptr : &sinfo;
  if (shader.full_subgroups) cinfo.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  cinfo.layout = layout;
  if (pipeline_statistics) cinfo.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline pipeline = VK_NULL_HANDLE;
  {
    std::shared_lock cache_lock(pipeline_cache_mutex);
    vk::check(d.vkCreateComputePipelines(device, pipeline_cache.get(), 1, &cinfo, nullptr, &pipeline),
              "vkCreateComputePipelines");
  }
  p->pipeline = vk::UniquePipeline(&d, device, pipeline);
  if (pipeline_statistics) vk::log_pipeline_statistics(d, device, pipeline, r.key());
  return p;
}

const ComputePipeline& ContextImpl::pipeline(const vk::ShaderRegistration& shader, std::span<const uint32_t> spec,
                                             uint32_t num_bindings, uint32_t push_bytes) {
  return pipeline(vk::PipelineRequest{&shader, {spec.begin(), spec.end()}, num_bindings, push_bytes});
}

const ComputePipeline& ContextImpl::pipeline(const vk::PipelineRequest& request) {
  const std::string key = request.key();
  std::lock_guard lock(pipeline_mutex);
  auto it = pipelines.find(key);
  if (it != pipelines.end()) return *it->second;
  return *pipelines.emplace(key, build_pipeline(request)).first->second;
}

ContextImpl::PreparedPipelines ContextImpl::prepare_pipelines(std::span<const vk::PipelineRequest> requests) {
  // The distinct requests, and those the registry lacks.
  std::map<std::string, const vk::PipelineRequest*> wanted;
  for (const auto& r : requests) wanted.emplace(r.key(), &r);
  std::vector<std::pair<std::string, const vk::PipelineRequest*>> missing;
  {
    std::lock_guard lock(pipeline_mutex);
    for (const auto& [key, r] : wanted)
      if (!pipelines.contains(key)) missing.emplace_back(key, r);
  }
  // Built outside the registry's lock, a request per thread at a time: a driver compiles each
  // pipeline on the calling thread, and an engine's start-up waits for the slowest set.
  std::vector<std::unique_ptr<ComputePipeline>> built(missing.size());
  std::vector<std::exception_ptr> failures(missing.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < missing.size(); i = next++) {
      try {
        built[i] = build_pipeline(*missing[i].second);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(missing.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::jthread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  pool.clear();  // joins
  // What was built joins the registry (one another thread made meanwhile stays, ours goes),
  // even when another request failed: the failure is reported, the work is kept.
  PreparedPipelines result{wanted.size(), 0};
  {
    std::lock_guard lock(pipeline_mutex);
    for (size_t i = 0; i < missing.size(); ++i)
      if (built[i] && pipelines.emplace(missing[i].first, std::move(built[i])).second) ++result.created;
  }
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace detail
}  // namespace vkpaged
