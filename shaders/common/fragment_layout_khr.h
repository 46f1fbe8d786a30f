// SPDX-License-Identifier: Apache-2.0
// Shared by C++ (src/ops/fragment_layout_khr.cpp) and GLSL (common/fragment_layout_khr.glsl):
// where the KHR fragment-layout probe writes what each lane's components hold.
#ifndef VKPAGED_FRAGMENT_LAYOUT_KHR_H
#define VKPAGED_FRAGMENT_LAYOUT_KHR_H

// Words before the codes: the subgroup's width, then the component counts of A, B and the
// accumulator (a fragment's length() in one invocation).
#define KHR_FRAGMENT_HEADER 4u
// Room per fragment: lanes of the first subgroup, component slots per lane. A slot past a
// fragment's count keeps KHR_FRAGMENT_UNUSED.
#define KHR_FRAGMENT_LANES 128u
#define KHR_FRAGMENT_SLOTS 64u
#define KHR_FRAGMENT_UNUSED 0xffffffffu
// Code of fragment f (0 A, 1 B, 2 accumulator), lane l, component i:
// codes[KHR_FRAGMENT_HEADER + (f * KHR_FRAGMENT_LANES + l) * KHR_FRAGMENT_SLOTS + i].
#define KHR_FRAGMENT_WORDS (KHR_FRAGMENT_HEADER + 3u * KHR_FRAGMENT_LANES * KHR_FRAGMENT_SLOTS)

#endif  // VKPAGED_FRAGMENT_LAYOUT_KHR_H
