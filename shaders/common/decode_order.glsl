// SPDX-License-Identifier: Apache-2.0
// The decode kernels' side of decode_order.comp (included after their bindings and push
// constants): which (sequence, partition) a workgroup takes.
layout(set = 0, binding = DECODE_BINDING_ORDER) readonly buffer OrderList { uint order_list[]; };

// Its grid position (y, z), or with FEATURE_ORDERED the item at its y in the list
// decode_order.comp wrote, longest first: the hardware starts workgroups in grid order, so the
// longest items start first and the short ones fill in at the end. An item outside the plan
// (a list never written) is flagged and comes back as (num_seqs, 0): the caller returns.
uvec2 decode_item(bool ordered) {
  if (!ordered) return gl_WorkGroupID.yz;
  const uint item = order_list[pc.order_offset + gl_WorkGroupID.y];
  const uvec2 seq_part = uvec2(item & 0xffffu, item >> 16);
  const uint parts = (FEATURES & FEATURE_SPLIT) != 0u ? pc.num_partitions : 1u;
  if (seq_part.x < pc.num_seqs && seq_part.y < parts) return seq_part;
  if (gl_LocalInvocationIndex == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_ORDER);
  return uvec2(pc.num_seqs, 0u);
}
