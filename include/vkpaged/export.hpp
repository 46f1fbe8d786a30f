#pragma once
// Symbol visibility for the shared library.
#if defined(VKPAGED_BUILDING)
#define VKPAGED_API __attribute__((visibility("default")))
#else
#define VKPAGED_API
#endif
