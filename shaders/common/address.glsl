// SPDX-License-Identifier: Apache-2.0
// 64-bit device addresses held as (low, high) words, for the `*_address.comp` variants that
// read or write pools past maxStorageBufferRange: only a block's start needs 64 bits, the
// offsets inside one block fit 32.
#ifndef VKPAGED_ADDRESS_GLSL
#define VKPAGED_ADDRESS_GLSL

// base + block * bytes, without 64-bit integers (shaderInt64 is optional).
uvec2 address_of_block(uvec2 base, uint block, uint bytes) {
  uint high, low, carry;
  umulExtended(block, bytes, high, low);
  const uint sum = uaddCarry(base.x, low, carry);
  return uvec2(sum, base.y + high + carry);
}

#endif  // VKPAGED_ADDRESS_GLSL
