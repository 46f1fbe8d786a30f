// SPDX-License-Identifier: Apache-2.0
// The buffers every portable attention kernel binds besides its caches (decode_kernel.glsl,
// decode_coopmat_kernel.glsl, attention_kernel.glsl, mla_attention_kernel.glsl), each at its
// kernel's own binding. The query and the output are strided views (common/strided_rows.glsl).
// Requires: VKP_BINDING(NAME), the binding of NAME in the kernel's interface
// (#define VKP_BINDING(name) DECODE_BINDING_##name; shader_interface.h).
#include "common/strided_rows.glsl"
layout(set = 0, binding = VKP_BINDING(QUERY)) readonly buffer Query { uint query_words[]; };
layout(set = 0, binding = VKP_BINDING(BLOCK_TABLES)) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = VKP_BINDING(CONTEXT_LENS)) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = VKP_BINDING(OUTPUT)) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = VKP_BINDING(ALIBI)) readonly buffer Alibi { float alibi_slopes[]; };
layout(set = 0, binding = VKP_BINDING(SINKS)) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = VKP_BINDING(LSE)) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = VKP_BINDING(STATUS)) buffer Status { uint status[]; };
