// SPDX-License-Identifier: Apache-2.0
// A token's slot in slot_mapping (docs/contract.md, "Cache operations"), shared by the cache
// writes (reshape_and_cache.glsl, mla_reshape_and_cache.glsl). The includer declares the
// constant SLOT_I64, the buffers slot_words[] and status[], and push constants `pc` with
// slot_offset, num_slots and status_offset.
#ifndef VKPAGED_SLOT_MAPPING_GLSL
#define VKPAGED_SLOT_MAPPING_GLSL

// The slot of `token`, or NO_SLOT: padding (negative), or a slot at or past N * B (flagged
// when `report`; num_slots < 2^32, so no valid slot is NO_SLOT).
const uint NO_SLOT = 0xffffffffu;
uint token_slot(uint token, bool report) {
  // int64 as (low, high) words, or int32 sign-extended.
  const uint low = slot_words[pc.slot_offset + token * (SLOT_I64 != 0u ? 2u : 1u)];
  const uint sign_extension = (low >> 31) != 0u ? 0xffffffffu : 0u;
  const uint high = SLOT_I64 != 0u ? slot_words[pc.slot_offset + token * 2u + 1u] : sign_extension;
  if ((high >> 31) != 0u) return NO_SLOT;
  if (high != 0u || low >= pc.num_slots) {
    if (report) atomicOr(status[pc.status_offset], STATUS_BAD_SLOT);
    return NO_SLOT;
  }
  return low;
}

#endif  // VKPAGED_SLOT_MAPPING_GLSL
