// SPDX-License-Identifier: Apache-2.0
// The decode kernels' buffers other than the caches and the scratch, declared once for both
// (decode_kernel.glsl, decode_coopmat_kernel.glsl); bindings from shader_interface.h. The query
// and the output are strided views (common/strided_rows.glsl).
#include "common/strided_rows.glsl"
layout(set = 0, binding = DECODE_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
layout(set = 0, binding = DECODE_BINDING_BLOCK_TABLES) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = DECODE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = DECODE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = DECODE_BINDING_ALIBI) readonly buffer Alibi { float alibi_slopes[]; };
layout(set = 0, binding = DECODE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = DECODE_BINDING_LSE) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = DECODE_BINDING_STATUS) buffer Status { uint status[]; };
