// SPDX-License-Identifier: Apache-2.0
// The extensions of a kernel's VKP_ADDRESS 1 module (*_address.comp, decode's address rows),
// which reads pools larger than maxStorageBufferRange through buffer device addresses
// (address.glsl, cache_pools.glsl). Included before any declaration.
#if VKP_ADDRESS
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
