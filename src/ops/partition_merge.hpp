// SPDX-License-Identifier: Apache-2.0
#pragma once
// The merge pass of every split over the key positions (shaders/partition_merge.comp): the one
// pipeline that decode, attention and MLA dispatch after their kernel, and its recording. The
// scratch it reads: shaders/common/split_scratch.h.
#include <cstdint>

#include "common/shader_interface.h"
#include "vk/context_impl.hpp"
#include "vk/pipeline_request.hpp"
#include "vkpaged/dtype.hpp"

namespace vkpaged::detail {

// query_starts: the rows are query tokens of requests laid out by query_starts (attention, MLA);
// otherwise a token per request (decode).
vk::PipelineRequest partition_merge_request(uint32_t workgroup, uint32_t value_width, DType query_dtype,
                                            uint32_t features, bool query_starts);

// A decode's push block as the attention problem's of one token per request (the shared fields
// copied through VKP_SHARED_PUSH_FIELDS): the merge pass's.
shader::AttentionPush attention_push_of(const shader::DecodePush& decode);

// The kernel's views the merge reads and writes (query_starts: unbound for a decode).
struct PartitionMergeViews {
  BoundView scratch, context_lens, query_starts, output, sinks, lse;
};

// After the kernel's dispatch: a barrier, then the merge of every (head, token) row of `push`,
// the kernel's push block (a decode's: one token per request).
void record_partition_merge(const ContextImpl& impl, VkCommandBuffer cmd, const ComputePipeline& merge,
                            const PartitionMergeViews& views, const shader::AttentionPush& push);

}  // namespace vkpaged::detail
