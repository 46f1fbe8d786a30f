// SPDX-License-Identifier: Apache-2.0
// Tree masks of the multi-query kernels (docs/contract.md, "Multi-query attention"): where a
// request's q_s x q_s mask starts in the batch's masks, and whether a row sees a new token.
// Requires, declared by the includer: const uint WG and GROUP (heads per workgroup; a row r is
// token r / GROUP of the tile), AttentionPush pc, the buffers tree_mask_words[] and status[],
// query_start_at(), shared uint s_mask_base, the globals g_first_j and g_new_tokens, and
// VKP_MASK_PARTIALS: a shared uint array of WG entries that find_mask_base may overwrite.
#ifndef VKPAGED_ATTENTION_TREE_MASK_GLSL
#define VKPAGED_ATTENTION_TREE_MASK_GLSL

#define VKP_TREE_MASK_HOOK
// Byte new_key of row j of the request's q_s x q_s mask; bytes past the mask are never read
// (device query_starts that disagree with the plan's: flagged, seen as hidden).
bool tree_mask_allows(uint row, uint new_key) {
  const uint j = g_first_j + row / GROUP;
  const uint index = j * g_new_tokens + new_key;  // < q_s^2 < 2^32 (q_s <= T, checked by the host)
  if (s_mask_base > pc.tree_mask_bytes || index >= pc.tree_mask_bytes - s_mask_base) {
    atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return false;
  }
  const uint byte_index = s_mask_base + index;
  return ((tree_mask_words[pc.tree_mask_offset + byte_index / 4u] >> (8u * (byte_index % 4u))) & 0xffu) != 0u;
}

// Sum of q_{s'}^2 over the requests before `request`: where its tree mask starts. Saturates
// instead of wrapping, so that device values past the plan's are caught by tree_mask_allows.
void find_mask_base(uint request, uint tid) {
  uint partial = 0u;
  for (uint r = tid; r < request; r += WG) {
    const uint q = min(query_start_at(r + 1u) - query_start_at(r), 0xffffu);
    const uint sum = partial + q * q;
    partial = sum < partial ? 0xffffffffu : sum;
  }
  VKP_MASK_PARTIALS[tid] = partial;
  barrier();
  if (tid == 0u) {
    uint total = 0u;
    for (uint i = 0u; i < WG; ++i) {
      const uint sum = total + VKP_MASK_PARTIALS[i];
      total = sum < total ? 0xffffffffu : sum;
    }
    s_mask_base = total;
  }
  barrier();
}

#endif  // VKPAGED_ATTENTION_TREE_MASK_GLSL
