# SPDX-License-Identifier: Apache-2.0
"""vkpaged: PagedAttention over a paged KV cache on Vulkan compute, from Python.

Two ways in (python/README.md):

- the host path: numpy arrays (or any CPU object with __dlpack__) in, numpy arrays out:
  decode_attention, batch_attention, mla_attention, merge_attention, rotary_embedding, reference.*;
- the engine path: a KvCache and DeviceBuffers on a Context, plans made once, and each step's
  record_* calls recorded into a CommandBuffer and submitted; or, with bucket plans
  (AttentionPlan.create_bucket, MlaPlan.create_bucket), a step recorded once, ended and submitted again for every step of
  its bucket, the device arrays rewritten in between. Context.prepare builds every pipeline the
  steps will need at start-up; Context.pipeline_cache_data / load_pipeline_cache carry them to the
  next run.

Page tables are dense (block_tables, context_lens) or FlashInfer's CSR form (kv_indptr,
kv_indices, kv_last_page_len) on both paths.

numpy has no bfloat16 nor fp8: bf16 arrays are uint16 arrays of the raw bits and fp8 arrays
uint8 arrays of the raw bytes, always with the dtype given explicitly ('bf16', 'fp8_e4m3',
'fp8_e5m2'); float_to_bits and bits_to_float convert as the library does.

Errors raise vkpaged.Error subclasses, one per vkpaged::ErrorCode, with the library's message.
"""
from ._errors import (DeviceError, Error, ErrorCode, InternalError, InvalidArgumentError, IoError, OutOfMemoryError,
                      UnsupportedError)
from ._core import (AppendResult, AttentionBucket, AttentionPlan, AttentionShape, BlockCopy, BlockManager, BlockUsage,
                    BufferView, CacheWriteKind, CommandBuffer, Context, CooperativeMatrixShape, DecodeBucket,
                    DecodePlan, DecodeShape, DeviceBuffer, DeviceInfo, DeviceList, KvCache, KvCacheShape,
                    KvCacheSizing, MlaBucket, MlaCacheViews, MlaPlan, MlaShape, PrefixCacheStats, PrepareReport, RotaryWrite,
                    TensorView, batch_attention, bits_to_float, cache_pack_factor, decode_attention, dtype_max,
                    dtype_size, float_to_bits, fp8_scale_from_amax, list_devices, merge_attention, mla_attention,
                    record_attention, record_decode, record_decode_order, record_gather, record_merge_attention,
                    record_mla_attention, record_mla_reshape_and_cache, record_reshape_and_cache,
                    record_rotary_embedding, reference, rotary_cos_sin_cache, rotary_embedding)
from ._core import __version__  # noqa: F401 (the linked library's version, which the metadata repeats)

__all__ = [
    "AppendResult", "AttentionBucket", "AttentionPlan", "AttentionShape", "BlockCopy", "BlockManager", "BlockUsage",
    "BufferView", "CacheWriteKind", "CommandBuffer", "Context", "CooperativeMatrixShape", "DecodeBucket",
    "DecodePlan", "DecodeShape", "DeviceBuffer", "DeviceError", "DeviceInfo", "DeviceList", "Error", "ErrorCode",
    "InternalError", "InvalidArgumentError", "IoError", "KvCache", "KvCacheShape", "KvCacheSizing", "MlaBucket",
    "MlaCacheViews", "MlaPlan", "MlaShape", "OutOfMemoryError", "PrefixCacheStats", "PrepareReport", "RotaryWrite", "TensorView",
    "UnsupportedError", "batch_attention", "bits_to_float", "cache_pack_factor", "decode_attention", "dtype_max",
    "dtype_size", "float_to_bits", "fp8_scale_from_amax", "list_devices", "merge_attention", "mla_attention",
    "record_attention", "record_decode", "record_decode_order", "record_gather", "record_merge_attention",
    "record_mla_attention", "record_mla_reshape_and_cache", "record_reshape_and_cache", "record_rotary_embedding",
    "reference", "rotary_cos_sin_cache", "rotary_embedding",
]
