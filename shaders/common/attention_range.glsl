// SPDX-License-Identifier: Apache-2.0
// Which key positions an attention row reads (docs/contract.md, "Decode attention" step 1 and
// "Multi-query attention"): query token j of a request with `len` positions, the last
// `new_tokens` of them new, stands at p = len - new_tokens + j and attends [t0, p] with
// t0 = max(0, p - W + 1) for a sliding window W > 0; with a tree mask the new tokens see each
// other as the mask says (attention_logits.glsl), so its rows reach up to len, and the window
// still applies to every key by position, the new tokens included. Decode is the
// row j = 0 of new_tokens = 1. The same functions place a workgroup's tile of rows, clip it to
// a split partition, and tell a merge pass which partitions were written.
#ifndef VKPAGED_ATTENTION_RANGE_GLSL
#define VKPAGED_ATTENTION_RANGE_GLSL

// The query heads one workgroup takes: `heads` (at most `group`) heads of kv head `kv_head`,
// from head0, for workgroup `index` along the heads (groups of `group` heads slice each kv
// head's query heads).
struct HeadGroup {
  uint kv_head;
  uint head0;
  uint heads;
};

HeadGroup head_group(uint index, uint num_heads, uint num_kv_heads, uint group) {
  const uint heads_per_kv = num_heads / num_kv_heads;
  const uint groups_per_kv = (heads_per_kv + group - 1u) / group;
  const uint kv_head = index / groups_per_kv;
  const uint first_in_kv = (index % groups_per_kv) * group;
  return HeadGroup(kv_head, kv_head * heads_per_kv + first_in_kv, min(group, heads_per_kv - first_in_kv));
}

// Key positions [lo, hi); empty when lo >= hi.
struct KeyRange {
  uint lo;
  uint hi;
};

// Position of new token j. Signed: a device-side length below new_tokens (flagged by the
// caller) puts the first tokens below 0, where they attend nothing.
int query_position(uint len, uint new_tokens, uint j) { return int(len) - int(new_tokens) + int(j); }

// t0 of a query at p >= 0 (window 0: none).
uint window_start(int p, uint window) { return window == 0u || p < int(window) ? 0u : uint(p - int(window) + 1); }

// The range of a row at p. With a tree mask it reaches every new token up to len, which the
// mask then sorts; the window starts it at t0 all the same (vLLM's tree attention windows the
// flattened positions).
KeyRange row_key_range(int p, uint len, uint new_tokens, uint window, bool tree) {
  if (p < 0) return KeyRange(0u, 0u);
  const uint t0 = window_start(p, window);
  return KeyRange(t0, tree ? len : uint(p) + 1u);
}

// The union of the ranges of the rows at positions first_p .. last_p (both ends grow with p):
// what a workgroup holding those rows walks. Whole key tiles above the diagonal and below the
// window are never visited.
KeyRange tile_key_range(int first_p, int last_p, uint len, uint new_tokens, uint window, bool tree) {
  if (last_p < 0) return KeyRange(0u, 0u);
  const uint lo = first_p < 0 ? 0u : row_key_range(first_p, len, new_tokens, window, tree).lo;
  return KeyRange(lo, row_key_range(last_p, len, new_tokens, window, tree).hi);
}

KeyRange clip_key_range(KeyRange r, uint lo, uint hi) { return KeyRange(max(r.lo, lo), min(r.hi, hi)); }

bool in_key_range(KeyRange r, uint t) { return t >= r.lo && t < r.hi; }

// The split partitions [x, y) of partition_tokens positions each that hold positions of r, at
// most num_partitions: a row's partial states live there, and nowhere else.
uvec2 key_range_partitions(KeyRange r, uint partition_tokens, uint num_partitions) {
  if (r.lo >= r.hi) return uvec2(0u, 0u);
  return uvec2(min(r.lo / partition_tokens, num_partitions), min((r.hi - 1u) / partition_tokens + 1u, num_partitions));
}

// ---- requests of a batch laid out by query_starts [S + 1] ----
// An includer that calls these defines `uint query_start_at(uint s)` (query_starts[s] on the
// device); one that does not (decode) leaves it undefined.
uint query_start_at(uint s);
// Device values may disagree with the plan's: every search ends in [0, S) after log2(S) steps,
// and the caller checks the request's start and end before it reads a row.

// Tile slots of TQ query tokens: request s owns slots [first_tile_slot(s), first_tile_slot(s + 1)),
// at least ceil(q_s / TQ) of them (floor((a + q) / TQ) - floor(a / TQ) + 1 >= ceil(q / TQ)), so
// a workgroup finds its request from query_starts alone, with no list made on the host. The
// grid has floor(T / TQ) + S slots; a request's last slot may stay idle.
uint first_tile_slot(uint query_start, uint request, uint tokens_per_tile) { return query_start / tokens_per_tile + request; }

// The request whose slots hold `slot`.
uint request_of_slot(uint slot, uint num_requests, uint tokens_per_tile) {
  uint lo = 0u, hi = num_requests;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (first_tile_slot(query_start_at(mid), mid, tokens_per_tile) <= slot) lo = mid;
    else hi = mid;
  }
  return lo;
}

// The request whose query tokens hold `token`.
uint request_of_token(uint token, uint num_requests) {
  uint lo = 0u, hi = num_requests;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (query_start_at(mid) <= token) lo = mid;
    else hi = mid;
  }
  return lo;
}

#endif  // VKPAGED_ATTENTION_RANGE_GLSL
