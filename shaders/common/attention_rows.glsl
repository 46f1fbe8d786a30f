// SPDX-License-Identifier: Apache-2.0
// A multi-query workgroup's rows (attention_kernel.glsl, mla_attention_kernel.glsl,
// mla_attention_matrix_khr.comp): ROWS = TQ * GROUP (token, head) rows, row r being token
// r / GROUP and head r % GROUP of the tile. attention_tile.glsl sets the request's globals.
// Requires: GROUP (const), the push block `pc` (AttentionPush), strided_rows.glsl.
#ifndef VKPAGED_ATTENTION_ROWS_GLSL
#define VKPAGED_ATTENTION_ROWS_GLSL

// The workgroup's request and rows, set once in main.
uint g_tile_tokens;  // query tokens of the tile (<= TQ)
uint g_new_tokens;   // q_s
uint g_first_token;  // the tile's first token, counted over the batch
uint g_first_j;      // ... and within its request
uint g_heads;        // query heads of the group (<= GROUP)
uint g_head0;

bool row_valid(uint r) { return r / GROUP < g_tile_tokens && r % GROUP < g_heads; }
// The row's index in [T, H] (LSE, scratch), and its first word in the query and the output.
uint row_index(uint r) { return (g_first_token + r / GROUP) * pc.num_heads + g_head0 + r % GROUP; }
uint query_row_word(uint r) { return row_word(pc.query_rows, g_first_token + r / GROUP, g_head0 + r % GROUP); }
uint output_row_word(uint r) { return row_word(pc.output_rows, g_first_token + r / GROUP, g_head0 + r % GROUP); }

#endif  // VKPAGED_ATTENTION_ROWS_GLSL
