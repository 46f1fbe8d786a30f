// SPDX-License-Identifier: Apache-2.0
#pragma once
// Symbol export for the C++ API, by the rules of vkpaged.h's VKP_API: the build defines
// VKPAGED_BUILDING while it compiles vkpaged; on Windows a program that links the static
// library defines VKPAGED_STATIC, and one that links the DLL imports its symbols.
#ifndef VKPAGED_API
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(VKPAGED_STATIC)
#define VKPAGED_API
#elif defined(VKPAGED_BUILDING)
#define VKPAGED_API __declspec(dllexport)
#else
#define VKPAGED_API __declspec(dllimport)
#endif
#elif defined(VKPAGED_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define VKPAGED_API __attribute__((visibility("default")))
#else
#define VKPAGED_API
#endif
#endif
