// SPDX-License-Identifier: Apache-2.0
// A multi-query workgroup's tile (attention_kernel.glsl, mla_attention_kernel.glsl,
// mla_attention_matrix_khr.comp): its request from query_starts, the tile of up to TQ of the
// request's new tokens it takes, the request's length clamped to the plan's cap, and the key
// positions the tile attends (its partition's when split). Bad query starts and lengths are
// flagged in the status word, once per request.
// Requires: TQ, WINDOW, SPLIT, TREE_MASK (const), the push block `pc` (AttentionPush), the
// context_lens and status buffers, query_start_at, attention_range.glsl, and the globals
// g_new_tokens, g_first_j, g_tile_tokens, g_first_token (attention_rows.glsl), which it sets.
#ifndef VKPAGED_ATTENTION_TILE_GLSL
#define VKPAGED_ATTENTION_TILE_GLSL

struct AttentionTile {
  uint request;
  uint len;        // the request's length, clamped to pc.context_cap
  uint window;     // the sliding window (0: none)
  int first_p;     // the position of the tile's first token
  uint first_new;  // the position of the request's first new token
  KeyRange span;   // the key positions the tile attends
};

// Finds workgroup slot `slot`'s tile in partition `part`; false: the workgroup has nothing to do
// (a bad query_starts, a request's spare slot, or no key of the tile in its partition).
// `reporter`: the invocation that flags each request's values once.
bool attention_tile(uint slot, uint part, uint tid, bool reporter, out AttentionTile tile) {
  tile.request = request_of_slot(slot, pc.num_requests, TQ);
  const uint q0 = query_start_at(tile.request);
  const uint q1 = query_start_at(tile.request + 1u);
  // q1 == q0: a padding request of a bucket's step (no new tokens): its slot stays idle below.
  if (q1 < q0 || q1 > pc.num_tokens) {
    if (reporter) atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return false;
  }
  g_new_tokens = q1 - q0;
  const uint first_slot = first_tile_slot(q0, tile.request, TQ);
  if (slot < first_slot) {  // query_starts[0] is not 0 on the device
    if (tid == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return false;
  }
  g_first_j = (slot - first_slot) * TQ;
  if (g_first_j >= g_new_tokens) return false;  // a request's spare slot
  g_tile_tokens = min(TQ, g_new_tokens - g_first_j);
  g_first_token = q0 + g_first_j;
  tile.len = context_lens[pc.context_lens_offset + tile.request];
  if (tile.len > pc.context_cap) {
    if (reporter && g_first_j == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    tile.len = pc.context_cap;
  }
  if (tile.len < g_new_tokens && reporter && g_first_j == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
  tile.window = WINDOW ? pc.sliding_window : 0u;
  tile.first_p = query_position(tile.len, g_new_tokens, g_first_j);
  tile.first_new = tile.len >= g_new_tokens ? tile.len - g_new_tokens : 0u;
  tile.span = tile_key_range(tile.first_p, tile.first_p + int(g_tile_tokens) - 1, tile.len, g_new_tokens, tile.window,
                             TREE_MASK);
  if (SPLIT) {
    tile.span = clip_key_range(tile.span, part * pc.partition_tokens, (part + 1u) * pc.partition_tokens);
    if (tile.span.lo >= tile.span.hi) return false;  // none of the tile's keys here: the merge pass reads nothing of it
  }
  return true;
}

#endif  // VKPAGED_ATTENTION_TILE_GLSL
