// SPDX-License-Identifier: Apache-2.0
// How one cache element of CACHE_DTYPE sits in memory, for the shaders that walk the cache
// layouts (docs/contract.md). The includer declares `const uint CACHE_DTYPE` first.
#ifndef VKPAGED_CACHE_ELEMENT_GLSL
#define VKPAGED_CACHE_ELEMENT_GLSL

const uint CACHE_BYTES = CACHE_DTYPE == DT_F32 ? 4u : (CACHE_DTYPE == DT_F16 || CACHE_DTYPE == DT_BF16 ? 2u : 1u);
const uint X = 16u / CACHE_BYTES;  // key pack factor: elements per 16-byte key chunk
const uint PER_WORD = 4u / CACHE_BYTES;
const uint ELEMENT_BITS = 8u * CACHE_BYTES;
const uint ELEMENT_MASK = CACHE_BYTES == 4u ? 0xffffffffu : (1u << ELEMENT_BITS) - 1u;
const bool FP8 = CACHE_DTYPE == DT_FP8_E4M3 || CACHE_DTYPE == DT_FP8_E5M2;

#endif
