// SPDX-License-Identifier: Apache-2.0
// The features every attention kernel tests (the portable ones through attention_constants.glsl,
// decode_coopmat_kernel.glsl, attention_matrix_khr.comp, mla_attention_matrix_khr.comp), from the
// FEATURE_* bits of their FEATURES specialization constant (shader_interface.h). A kernel's own
// bits (ORDERED, TREE_MASK, ...) it reads itself.
// Requires: FEATURES (the specialization constant).
#ifndef VKPAGED_ATTENTION_FEATURES_GLSL
#define VKPAGED_ATTENTION_FEATURES_GLSL

const bool ALIBI = (FEATURES & FEATURE_ALIBI) != 0u;
const bool SOFTCAP = (FEATURES & FEATURE_SOFTCAP) != 0u;
const bool SINKS = (FEATURES & FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & FEATURE_LSE) != 0u;
const bool SPLIT = (FEATURES & FEATURE_SPLIT) != 0u;

#endif  // VKPAGED_ATTENTION_FEATURES_GLSL
