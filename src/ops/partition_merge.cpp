// SPDX-License-Identifier: Apache-2.0
// The merge pass of every split (shaders/partition_merge.comp): its pipeline and its recording.
#include "ops/partition_merge.hpp"

#include <array>

#include "embedded_shaders.hpp"

namespace vkpaged::detail {

shader::AttentionPush attention_push_of(const shader::DecodePush& decode) {
  shader::AttentionPush push{};
  push.num_requests = decode.num_seqs;
  push.num_tokens = decode.num_seqs;
#define VKP_COPY_PUSH_FIELD(type, name) push.name = decode.name;
  VKP_SHARED_PUSH_FIELDS(VKP_COPY_PUSH_FIELD)
#undef VKP_COPY_PUSH_FIELD
  return push;
}

vk::PipelineRequest partition_merge_request(uint32_t workgroup, uint32_t value_width, DType query_dtype,
                                            uint32_t features, bool query_starts) {
  std::vector<uint32_t> spec(PARTITION_MERGE_SC_COUNT);
  spec[PARTITION_MERGE_SC_WORKGROUP] = workgroup;
  spec[PARTITION_MERGE_SC_VALUE_WIDTH] = value_width;
  spec[PARTITION_MERGE_SC_QUERY_DTYPE] = uint32_t(query_dtype);
  spec[PARTITION_MERGE_SC_FEATURES] = features;
  spec[PARTITION_MERGE_SC_QUERY_STARTS] = query_starts ? 1 : 0;
  return vk::PipelineRequest{&vk::shader_partition_merge(), std::move(spec), PARTITION_MERGE_BINDING_COUNT,
                             sizeof(shader::AttentionPush)};
}

void record_partition_merge(const ContextImpl& impl, VkCommandBuffer cmd, const ComputePipeline& merge,
                            const PartitionMergeViews& views, const shader::AttentionPush& push) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  impl.d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                              &barrier, 0, nullptr, 0, nullptr);
  static_assert(PARTITION_MERGE_BINDING_SCRATCH == 0 && PARTITION_MERGE_BINDING_CONTEXT_LENS == 1 &&
                    PARTITION_MERGE_BINDING_QUERY_STARTS == 2 && PARTITION_MERGE_BINDING_OUTPUT == 3 &&
                    PARTITION_MERGE_BINDING_SINKS == 4 && PARTITION_MERGE_BINDING_LSE == 5 &&
                    PARTITION_MERGE_BINDING_COUNT == 6,
                "the views in binding order");
  const std::array<BoundView, PARTITION_MERGE_BINDING_COUNT> bound{views.scratch, views.context_lens, views.query_starts,
                                                                   views.output,  views.sinks,        views.lse};
  impl.dispatch(cmd, merge, bound, &push, push.num_heads, push.num_tokens, 1);
}

}  // namespace vkpaged::detail
