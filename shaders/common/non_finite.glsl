// SPDX-License-Identifier: Apache-2.0
// Non-finite inputs are not hidden (docs/contract.md, Decode step 9): the tests a kernel makes
// on the bits, not with isnan/isinf, which a compiler may fold away, and NaN written as bits.
// A head whose query or attended key is NaN or infinite is "poisoned": its outputs and LSE are
// NaN. A split partition of a poisoned head stores NaN as its max (and sum); the merges test
// that with is_nan_bits and make the merged head NaN. The one definition of these tests: every
// attention kernel, merge and epilogue includes this file (softmax_state.glsl does).
#ifndef VKPAGED_NON_FINITE_GLSL
#define VKPAGED_NON_FINITE_GLSL

#define VKP_QUIET_NAN uintBitsToFloat(0x7fc00000u)

// NaN or +-Inf: every exponent bit set.
bool non_finite(float x) { return (floatBitsToUint(x) & 0x7f800000u) == 0x7f800000u; }
// NaN only (the poisoned partitions' mark; -Inf marks an empty one).
bool is_nan_bits(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
// An output element: NaN where the arithmetic made it NaN or infinite (a non-finite value was
// attended: an infinite value gives NaN, never Inf).
float nan_if_non_finite(float x) { return non_finite(x) ? VKP_QUIET_NAN : x; }

// The same tests under the names the shared attention blocks (softmax_state.glsl,
// attention_*.glsl) call them by.
#define VKP_NAN VKP_QUIET_NAN
bool non_finite_bits(float x) { return non_finite(x); }
bool nan_bits(float x) { return is_nan_bits(x); }

#endif
