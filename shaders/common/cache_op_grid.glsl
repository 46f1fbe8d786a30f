// SPDX-License-Identifier: Apache-2.0
// The grid of the cache operations (gather.glsl, reshape_and_cache.glsl): one invocation per
// (row, kv head, 16-byte chunk of x elements), over groups_x workgroups a row of the 2D dispatch.
// Requires: X (cache_element.glsl) and the push block `pc` with groups_x, num_kv_heads, head_size.
#ifndef VKPAGED_CACHE_OP_GRID_GLSL
#define VKPAGED_CACHE_OP_GRID_GLSL

struct CacheOpItem {
  uint row;  // gather: an output row; reshape_and_cache: a token
  uint head;
  uint chunk;
};

// This invocation's item among `rows` rows' items; false past the last.
bool cache_op_item(uint rows, out CacheOpItem item) {
  const uint id = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * CACHE_OP_WORKGROUP + gl_LocalInvocationID.x;
  const uint chunks = pc.head_size / X;
  const uint per_row = pc.num_kv_heads * chunks;
  if (id >= rows * per_row) return false;
  item.row = id / per_row;
  item.head = (id % per_row) / chunks;
  item.chunk = id % chunks;
  return true;
}

#endif  // VKPAGED_CACHE_OP_GRID_GLSL
