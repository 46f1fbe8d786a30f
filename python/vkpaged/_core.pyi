# SPDX-License-Identifier: Apache-2.0
# Type stubs of the extension (python/src/*.cpp). Enums of the C++ API are strings here.
from types import ModuleType, TracebackType
from typing import Any, Iterator, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

DType = Literal["f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "u32", "i64", "u8"]
FloatDType = Literal["f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"]
KvLayout = Literal["vllm", "nhd", "hnd"]
RotaryStyle = Literal["neox", "gptj"]
SplitMode = Literal["auto", "single", "split"]
DecodeKernel = Literal["auto", "scalar", "matrix", "matrix_khr"]
AttentionKernel = Literal["auto", "decode", "scalar", "matrix"]
DecodeOrder = Literal["auto", "grid", "longest_first"]
DecodeMerge = Literal["reduce_pass", "in_dispatch"]
Admission = Literal["ok", "later", "never"]
KvCacheKind = Literal["key_value", "mla_one_pool", "mla_two_pools"]
MlaCacheForm = Literal["one_pool", "two_pools"]
# A host array: a numpy array, any CPU object with __dlpack__, or what numpy.asarray takes.
# bf16 travels as uint16 raw bits and fp8 as uint8 raw bytes, with the dtype given explicitly.
HostArray = Any
Pairs = Sequence[Union["BlockCopy", Tuple[int, int]]]

__version__: str  # the linked library's "major.minor.patch"

def error_code_name(code: int) -> str: ...

# ---- element types ----
def dtype_size(dtype: DType) -> int: ...
def dtype_max(dtype: FloatDType) -> float: ...
def cache_pack_factor(dtype: DType) -> int: ...
def float_to_bits(values: npt.ArrayLike, dtype: FloatDType) -> np.ndarray: ...
def bits_to_float(bits: HostArray, dtype: FloatDType) -> npt.NDArray[np.float32]: ...
def fp8_scale_from_amax(amax: float, dtype: Literal["fp8_e4m3", "fp8_e5m2"]) -> float: ...

# ---- devices and the Context ----
class CooperativeMatrixShape:
    m: int
    n: int
    k: int
    a_type: int
    b_type: int
    c_type: int
    result_type: int
    saturating_accumulation: bool
    scope: int

class DeviceInfo:
    index: int
    name: str
    type: str
    driver: str
    vendor_id: int
    api_version: int
    subgroup_size: int
    subgroup_arithmetic: bool
    subgroup_shuffle: bool
    storage_16bit: bool
    storage_8bit: bool
    shader_float16: bool
    shader_int64: bool
    buffer_device_address: bool
    cooperative_matrix: bool
    decode_timeline: bool
    vulkan_memory_model: bool
    vulkan_memory_model_device_scope: bool
    cooperative_matrix_khr: bool
    cooperative_matrix_khr_shapes: list[CooperativeMatrixShape]
    push_descriptor: bool
    timestamps: bool
    max_storage_buffer_range: int
    max_shared_memory: int
    max_workgroup_invocations: int
    max_push_constants: int
    min_storage_buffer_offset_alignment: int
    compute_units: int
    compute_units_reported: bool
    timestamp_period_ns: float
    timestamp_valid_bits: int
    device_local_bytes: int
    memory_budget: bool
    device_local_free_bytes: int
    max_memory_allocation_size: int

class DeviceList:
    devices: list[DeviceInfo]
    default_index: int

def list_devices() -> DeviceList: ...

class Context:
    def __init__(self, device: Union[int, str] = "", *, validation: bool = False,
                 disable_subgroup_arithmetic: bool = False, fence_timeout_ms: int = 60000,
                 read_environment: bool = False) -> None: ...
    @property
    def device_info(self) -> DeviceInfo: ...
    @property
    def validation_message_count(self) -> int: ...
    @property
    def fence_timeout_ms(self) -> int: ...
    def create_buffer(self, nbytes: int, *, host_visible: bool = False) -> DeviceBuffer: ...
    def tensor_from(self, array: HostArray, *, dtype: Optional[DType] = None,
                    host_visible: bool = False) -> TensorView: ...
    def prepare(self, *, attention: Sequence[AttentionBucket] = ..., decode: Sequence[DecodeBucket] = ...,
                cache_writes: Sequence[CacheWriteKind] = ..., mla: Sequence[MlaBucket] = ...) -> PrepareReport: ...
    def pipeline_cache_data(self) -> bytes: ...
    def load_pipeline_cache(self, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> None: ...

# ---- device memory ----
class BufferView:
    @property
    def buffer(self) -> Union[DeviceBuffer, KvCache]: ...
    @property
    def offset(self) -> int: ...
    @property
    def size(self) -> int: ...

class TensorView:
    @property
    def buffer(self) -> Union[DeviceBuffer, KvCache]: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def offset(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def memory(self) -> BufferView: ...
    def write(self, array: HostArray) -> None: ...
    def read(self) -> np.ndarray: ...

class DeviceBuffer:
    @property
    def size(self) -> int: ...
    @property
    def host_visible(self) -> bool: ...
    @property
    def context(self) -> Context: ...
    def view(self, offset: int = 0, nbytes: Optional[int] = None) -> BufferView: ...
    def tensor(self, dtype: DType, shape: Sequence[int], offset: int = 0) -> TensorView: ...
    def write(self, array: HostArray, offset: int = 0, dtype: Optional[DType] = None) -> None: ...
    def read(self, dtype: DType, shape: Sequence[int], offset: int = 0) -> np.ndarray: ...

class CommandBuffer:
    def __init__(self, context: Context) -> None: ...
    @property
    def context(self) -> Context: ...
    @property
    def ended(self) -> bool: ...
    def barrier(self) -> None: ...
    def end(self) -> None: ...
    def submit(self) -> None: ...
    def discard(self) -> None: ...
    def __enter__(self) -> CommandBuffer: ...
    def __exit__(self, type: Optional[type], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> bool: ...

# ---- the host path ----
@overload
def decode_attention(context: Context, query: HostArray, key_cache: HostArray, value_cache: HostArray,
                     block_tables: Optional[HostArray] = None, context_lens: Optional[HostArray] = None, *,
                     kv_indptr: Optional[HostArray] = None, kv_indices: Optional[HostArray] = None,
                     kv_last_page_len: Optional[HostArray] = None, max_blocks_per_seq: int = 0,
                     query_dtype: Optional[DType] = None,
                     cache_dtype: Optional[str] = None, kv_layout: KvLayout = "vllm",
                     alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                     sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                     k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[False] = False,
                     kernel: DecodeKernel = "auto", split: SplitMode = "auto", partition_tokens: int = 0,
                     order: DecodeOrder = "auto", merge: DecodeMerge = "reduce_pass") -> np.ndarray: ...
@overload
def decode_attention(context: Context, query: HostArray, key_cache: HostArray, value_cache: HostArray,
                     block_tables: Optional[HostArray] = None, context_lens: Optional[HostArray] = None, *,
                     kv_indptr: Optional[HostArray] = None, kv_indices: Optional[HostArray] = None,
                     kv_last_page_len: Optional[HostArray] = None, max_blocks_per_seq: int = 0,
                     query_dtype: Optional[DType] = None,
                     cache_dtype: Optional[str] = None, kv_layout: KvLayout = "vllm",
                     alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                     sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                     k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[True],
                     kernel: DecodeKernel = "auto", split: SplitMode = "auto", partition_tokens: int = 0,
                     order: DecodeOrder = "auto",
                     merge: DecodeMerge = "reduce_pass") -> Tuple[np.ndarray, npt.NDArray[np.float32]]: ...
@overload
def batch_attention(context: Context, query: HostArray, key_cache: HostArray, value_cache: HostArray,
                    block_tables: Optional[HostArray] = None, context_lens: Optional[HostArray] = None,
                    query_starts: Optional[HostArray] = None, *, tree_mask: Optional[HostArray] = None,
                    kv_indptr: Optional[HostArray] = None, kv_indices: Optional[HostArray] = None,
                    kv_last_page_len: Optional[HostArray] = None, max_blocks_per_seq: int = 0,
                    query_dtype: Optional[DType] = None,
                    cache_dtype: Optional[str] = None, kv_layout: KvLayout = "vllm",
                    alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                    sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                    k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[False] = False,
                    kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                    partition_tokens: int = 0) -> np.ndarray: ...
@overload
def batch_attention(context: Context, query: HostArray, key_cache: HostArray, value_cache: HostArray,
                    block_tables: Optional[HostArray] = None, context_lens: Optional[HostArray] = None,
                    query_starts: Optional[HostArray] = None, *, tree_mask: Optional[HostArray] = None,
                    kv_indptr: Optional[HostArray] = None, kv_indices: Optional[HostArray] = None,
                    kv_last_page_len: Optional[HostArray] = None, max_blocks_per_seq: int = 0,
                    query_dtype: Optional[DType] = None,
                    cache_dtype: Optional[str] = None, kv_layout: KvLayout = "vllm",
                    alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                    sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                    k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[True],
                    kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                    partition_tokens: int = 0) -> Tuple[np.ndarray, npt.NDArray[np.float32]]: ...
def merge_attention(context: Context, output_a: HostArray, lse_a: HostArray, output_b: HostArray, lse_b: HostArray,
                    *, dtype: Optional[DType] = None) -> Tuple[np.ndarray, npt.NDArray[np.float32]]: ...
def rotary_cos_sin_cache(max_position: int, rotary_dim: int, base: float = 10000.0,
                         dtype: Literal["f32", "f16", "bf16"] = "f32") -> np.ndarray: ...
def rotary_embedding(context: Context, query: Optional[HostArray], key: Optional[HostArray], positions: HostArray,
                     cos_sin_cache: HostArray, *, style: RotaryStyle = "neox",
                     dtype: Optional[DType] = None) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]: ...

@overload
def mla_attention(context: Context, query: HostArray, block_tables: Optional[HostArray] = None,
                  context_lens: Optional[HostArray] = None, query_starts: Optional[HostArray] = None, *,
                  mla_cache: Optional[HostArray] = None, value_head_size: int = 0,
                  ckv_cache: Optional[HostArray] = None, kpe_cache: Optional[HostArray] = None,
                  tree_mask: Optional[HostArray] = None, kv_indptr: Optional[HostArray] = None,
                  kv_indices: Optional[HostArray] = None, kv_last_page_len: Optional[HostArray] = None,
                  max_blocks_per_seq: int = 0, query_dtype: Optional[DType] = None, cache_dtype: Optional[str] = None,
                  alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                  sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                  k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[False] = False,
                  split: SplitMode = "auto", partition_tokens: int = 0) -> np.ndarray: ...
@overload
def mla_attention(context: Context, query: HostArray, block_tables: Optional[HostArray] = None,
                  context_lens: Optional[HostArray] = None, query_starts: Optional[HostArray] = None, *,
                  mla_cache: Optional[HostArray] = None, value_head_size: int = 0,
                  ckv_cache: Optional[HostArray] = None, kpe_cache: Optional[HostArray] = None,
                  tree_mask: Optional[HostArray] = None, kv_indptr: Optional[HostArray] = None,
                  kv_indices: Optional[HostArray] = None, kv_last_page_len: Optional[HostArray] = None,
                  max_blocks_per_seq: int = 0, query_dtype: Optional[DType] = None, cache_dtype: Optional[str] = None,
                  alibi_slopes: Optional[HostArray] = None, sinks: Optional[HostArray] = None,
                  sliding_window: int = 0, scale: Optional[float] = None, softcap: float = 0.0,
                  k_scale: float = 1.0, v_scale: float = 1.0, return_lse: Literal[True],
                  split: SplitMode = "auto",
                  partition_tokens: int = 0) -> Tuple[np.ndarray, npt.NDArray[np.float32]]: ...

# reference.decode_attention, reference.batch_attention and reference.mla_attention: as above, without the context
# (and without the plan options)
reference: ModuleType

# ---- plans and the engine path ----
class DecodeShape:
    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    block_size: int
    num_blocks: int
    max_blocks_per_seq: int
    max_context_len: int
    query_dtype: DType
    cache_dtype: DType
    kv_layout: KvLayout
    alibi: bool
    softcap: bool
    sinks: bool
    lse: bool
    csr_page_table: bool
    def __init__(self, *, num_seqs: int = 0, num_heads: int = 0, num_kv_heads: int = 0, head_size: int = 0,
                 block_size: int = 0, num_blocks: int = 0, max_blocks_per_seq: int = 0, max_context_len: int = 0,
                 query_dtype: DType = "f16", cache_dtype: DType = "f16", kv_layout: KvLayout = "vllm",
                 alibi: bool = False, softcap: bool = False, sinks: bool = False, lse: bool = False,
                 csr_page_table: bool = False) -> None: ...

class AttentionShape:
    num_requests: int
    num_query_tokens: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    block_size: int
    num_blocks: int
    max_blocks_per_seq: int
    max_context_len: int
    query_dtype: DType
    cache_dtype: DType
    kv_layout: KvLayout
    sliding_window: int
    softcap: bool
    alibi: bool
    sinks: bool
    lse: bool
    tree_mask: bool
    csr_page_table: bool
    def __init__(self, *, num_requests: int = 0, num_query_tokens: int = 0, num_heads: int = 0,
                 num_kv_heads: int = 0, head_size: int = 0, block_size: int = 0, num_blocks: int = 0,
                 max_blocks_per_seq: int = 0, max_context_len: int = 0, query_dtype: DType = "f16",
                 cache_dtype: DType = "f16", kv_layout: KvLayout = "vllm", sliding_window: int = 0,
                 softcap: bool = False, alibi: bool = False, sinks: bool = False, lse: bool = False,
                 tree_mask: bool = False, csr_page_table: bool = False) -> None: ...

class DecodePlan:
    def __init__(self, context: Context, shape: DecodeShape, *, sliding_window: int = 0, split: SplitMode = "auto",
                 partition_tokens: int = 0, kernel: DecodeKernel = "auto", order: DecodeOrder = "auto",
                 merge: DecodeMerge = "reduce_pass") -> None: ...
    @property
    def shape(self) -> DecodeShape: ...
    @property
    def split(self) -> bool: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def partition_tokens(self) -> int: ...
    @property
    def scratch_bytes(self) -> int: ...
    @property
    def longest_first(self) -> bool: ...
    @property
    def order_bytes(self) -> int: ...
    @property
    def merge_counter_bytes(self) -> int: ...
    def describe(self) -> str: ...

class AttentionPlan:
    def __init__(self, context: Context, shape: AttentionShape, query_starts: HostArray, *,
                 kernel: AttentionKernel = "auto", split: SplitMode = "auto", partition_tokens: int = 0) -> None: ...
    @staticmethod
    def create_bucket(context: Context, shape: AttentionShape, max_query_tokens: int = 0, *,
                      kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                      partition_tokens: int = 0) -> AttentionPlan: ...
    @staticmethod
    def max_scratch_bytes(context: Context, shape: AttentionShape, max_query_tokens: int = 0, *,
                          kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                          partition_tokens: int = 0) -> int: ...
    @property
    def shape(self) -> AttentionShape: ...
    @property
    def bucket(self) -> bool: ...
    @property
    def kernel(self) -> Literal["decode", "scalar", "matrix"]: ...
    @property
    def max_query_tokens(self) -> int: ...
    @property
    def tree_mask_bytes(self) -> int: ...
    @property
    def split(self) -> bool: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def scratch_bytes(self) -> int: ...
    def describe(self) -> str: ...

def record_decode(cmd: CommandBuffer, plan: DecodePlan, *, query: TensorView, key_cache: TensorView,
                  value_cache: TensorView, block_tables: Optional[TensorView] = None,
                  context_lens: Optional[TensorView] = None, output: TensorView,
                  kv_indptr: Optional[TensorView] = None, kv_indices: Optional[TensorView] = None,
                  kv_last_page_len: Optional[TensorView] = None, alibi_slopes: Optional[TensorView] = None,
                  sinks: Optional[TensorView] = None, lse: Optional[TensorView] = None,
                  scratch: Optional[BufferView] = None, order: Optional[BufferView] = None,
                  status: Optional[BufferView] = None, merge_counters: Optional[BufferView] = None,
                  scale: Optional[float] = None, softcap: float = 0.0, k_scale: float = 1.0,
                  v_scale: float = 1.0) -> None: ...
def record_decode_order(cmd: CommandBuffer, plan: DecodePlan, context_lens: TensorView, order: BufferView) -> None: ...
def record_attention(cmd: CommandBuffer, plan: AttentionPlan, *, query: TensorView, key_cache: TensorView,
                     value_cache: TensorView, block_tables: Optional[TensorView] = None,
                     context_lens: Optional[TensorView] = None, query_starts: TensorView, output: TensorView,
                     kv_indptr: Optional[TensorView] = None, kv_indices: Optional[TensorView] = None,
                     kv_last_page_len: Optional[TensorView] = None, lse: Optional[TensorView] = None,
                     tree_mask: Optional[TensorView] = None, alibi_slopes: Optional[TensorView] = None,
                     sinks: Optional[TensorView] = None, scratch: Optional[BufferView] = None,
                     status: Optional[BufferView] = None, scale: Optional[float] = None, softcap: float = 0.0,
                     k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...
def record_reshape_and_cache(cmd: CommandBuffer, *, key: TensorView, value: TensorView, slot_mapping: TensorView,
                             key_cache: TensorView, value_cache: TensorView, layout: KvLayout = "vllm",
                             status: Optional[BufferView] = None, query: Optional[TensorView] = None,
                             positions: Optional[TensorView] = None, cos_sin_cache: Optional[TensorView] = None,
                             rotary_style: RotaryStyle = "neox", k_scale: float = 1.0,
                             v_scale: float = 1.0) -> None: ...
def record_rotary_embedding(cmd: CommandBuffer, *, query: Optional[TensorView] = None,
                            key: Optional[TensorView] = None, positions: TensorView, cos_sin_cache: TensorView,
                            style: RotaryStyle = "neox", status: Optional[BufferView] = None) -> None: ...
def record_gather(cmd: CommandBuffer, *, key_cache: TensorView, value_cache: TensorView, block_tables: TensorView,
                  seq_starts: TensorView, key_out: TensorView, value_out: TensorView, layout: KvLayout = "vllm",
                  status: Optional[BufferView] = None, k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...
def record_merge_attention(cmd: CommandBuffer, *, output_a: TensorView, lse_a: TensorView, output_b: TensorView,
                           lse_b: TensorView, output: TensorView, lse: Optional[TensorView] = None) -> None: ...

# ---- multi-head latent attention (MLA) ----
class MlaShape:
    attention: AttentionShape
    value_head_size: int
    cache_form: MlaCacheForm
    def __init__(self, attention: AttentionShape, *, value_head_size: int = 0,
                 cache_form: MlaCacheForm = "one_pool") -> None: ...
    @property
    def rope_head_size(self) -> int: ...

class MlaPlan:
    def __init__(self, context: Context, shape: MlaShape, query_starts: HostArray, *,
                 kernel: AttentionKernel = "auto", split: SplitMode = "auto", partition_tokens: int = 0) -> None: ...
    @staticmethod
    def create_bucket(context: Context, shape: MlaShape, max_query_tokens: int = 0, *,
                      kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                      partition_tokens: int = 0) -> MlaPlan: ...
    @staticmethod
    def max_scratch_bytes(context: Context, shape: MlaShape, max_query_tokens: int = 0, *,
                          kernel: AttentionKernel = "auto", split: SplitMode = "auto",
                          partition_tokens: int = 0) -> int: ...
    @property
    def bucket(self) -> bool: ...
    @property
    def max_query_tokens(self) -> int: ...
    @property
    def kernel(self) -> AttentionKernel: ...
    @property
    def shape(self) -> MlaShape: ...
    @property
    def tree_mask_bytes(self) -> int: ...
    @property
    def split(self) -> bool: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def scratch_bytes(self) -> int: ...
    def describe(self) -> str: ...

def record_mla_reshape_and_cache(cmd: CommandBuffer, *, kv_c: TensorView, k_pe: TensorView,
                                 slot_mapping: TensorView, mla_cache: Optional[TensorView] = None,
                                 ckv_cache: Optional[TensorView] = None, kpe_cache: Optional[TensorView] = None,
                                 status: Optional[BufferView] = None, positions: Optional[TensorView] = None,
                                 cos_sin_cache: Optional[TensorView] = None, rotary_style: RotaryStyle = "neox",
                                 scale: float = 1.0) -> None: ...
def record_mla_attention(cmd: CommandBuffer, plan: MlaPlan, *, query: TensorView,
                         mla_cache: Optional[TensorView] = None, ckv_cache: Optional[TensorView] = None,
                         kpe_cache: Optional[TensorView] = None, block_tables: Optional[TensorView] = None,
                         context_lens: Optional[TensorView] = None, query_starts: TensorView, output: TensorView,
                         kv_indptr: Optional[TensorView] = None, kv_indices: Optional[TensorView] = None,
                         kv_last_page_len: Optional[TensorView] = None, lse: Optional[TensorView] = None,
                         tree_mask: Optional[TensorView] = None, alibi_slopes: Optional[TensorView] = None,
                         sinks: Optional[TensorView] = None, scratch: Optional[BufferView] = None,
                         status: Optional[BufferView] = None, scale: Optional[float] = None, softcap: float = 0.0,
                         k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...

# ---- the cache ----
class KvCacheShape:
    num_layers: int
    num_kv_heads: int
    head_size: int
    block_size: int
    dtype: FloatDType
    layout: KvLayout
    kind: KvCacheKind
    rope_head_size: int
    def __init__(self, *, num_layers: int = 1, num_kv_heads: int = 0, head_size: int = 0, block_size: int = 16,
                 dtype: FloatDType = "f16", layout: KvLayout = "vllm", kind: KvCacheKind = "key_value",
                 rope_head_size: int = 0) -> None: ...

class MlaCacheViews:
    @property
    def mla_cache(self) -> Optional[TensorView]: ...
    @property
    def ckv_cache(self) -> Optional[TensorView]: ...
    @property
    def kpe_cache(self) -> Optional[TensorView]: ...

class KvCacheSizing:
    num_blocks: int
    num_tokens: int
    block_bytes: int
    bytes_per_block: int
    pool_bytes: int
    total_bytes: int
    fraction_of: Literal["none", "heap_size", "memory_budget"]
    fraction_of_bytes: int

class KvCache:
    def __init__(self, context: Context, shape: KvCacheShape, *, num_blocks: int = 0, budget_bytes: int = 0,
                 budget_fraction: float = 0.0, num_host_blocks: int = 0) -> None: ...
    @staticmethod
    def plan(device: DeviceInfo, shape: KvCacheShape, *, num_blocks: int = 0, budget_bytes: int = 0,
             budget_fraction: float = 0.0, num_host_blocks: int = 0) -> KvCacheSizing: ...
    @staticmethod
    def bytes_per_block(shape: KvCacheShape) -> int: ...
    @property
    def shape(self) -> KvCacheShape: ...
    @property
    def layout(self) -> KvLayout: ...
    @property
    def dtype(self) -> FloatDType: ...
    @property
    def num_blocks(self) -> int: ...
    @property
    def num_host_blocks(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def sizing(self) -> KvCacheSizing: ...
    @property
    def host_bytes(self) -> int: ...
    @property
    def context(self) -> Context: ...
    def key_cache(self, layer: int) -> TensorView: ...
    def value_cache(self, layer: int) -> TensorView: ...
    def host_key_cache(self, layer: int) -> TensorView: ...
    def host_value_cache(self, layer: int) -> TensorView: ...
    def decode_shape(self, batch: DecodeShape) -> DecodeShape: ...
    def attention_shape(self, batch: AttentionShape) -> AttentionShape: ...
    def mla_cache(self, layer: int) -> MlaCacheViews: ...
    def host_mla_cache(self, layer: int) -> MlaCacheViews: ...
    def mla_shape(self, batch: AttentionShape) -> MlaShape: ...
    def record_reshape_and_cache(self, cmd: CommandBuffer, layer: int, *, key: TensorView, value: TensorView,
                                 slot_mapping: TensorView, status: Optional[BufferView] = None,
                                 query: Optional[TensorView] = None, positions: Optional[TensorView] = None,
                                 cos_sin_cache: Optional[TensorView] = None, rotary_style: RotaryStyle = "neox",
                                 k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...
    def record_decode(self, cmd: CommandBuffer, layer: int, plan: DecodePlan, *, query: TensorView,
                      block_tables: Optional[TensorView] = None, context_lens: Optional[TensorView] = None,
                      output: TensorView, kv_indptr: Optional[TensorView] = None,
                      kv_indices: Optional[TensorView] = None, kv_last_page_len: Optional[TensorView] = None,
                      alibi_slopes: Optional[TensorView] = None, sinks: Optional[TensorView] = None,
                      lse: Optional[TensorView] = None, scratch: Optional[BufferView] = None,
                      order: Optional[BufferView] = None, status: Optional[BufferView] = None,
                      merge_counters: Optional[BufferView] = None, scale: Optional[float] = None,
                      softcap: float = 0.0, k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...
    def record_attention(self, cmd: CommandBuffer, layer: int, plan: AttentionPlan, *, query: TensorView,
                         block_tables: Optional[TensorView] = None, context_lens: Optional[TensorView] = None,
                         query_starts: TensorView, output: TensorView, kv_indptr: Optional[TensorView] = None,
                         kv_indices: Optional[TensorView] = None, kv_last_page_len: Optional[TensorView] = None,
                         lse: Optional[TensorView] = None, tree_mask: Optional[TensorView] = None,
                         alibi_slopes: Optional[TensorView] = None, sinks: Optional[TensorView] = None,
                         scratch: Optional[BufferView] = None, status: Optional[BufferView] = None,
                         scale: Optional[float] = None, softcap: float = 0.0, k_scale: float = 1.0,
                         v_scale: float = 1.0) -> None: ...
    def record_mla_reshape_and_cache(self, cmd: CommandBuffer, layer: int, *, kv_c: TensorView, k_pe: TensorView,
                                     slot_mapping: TensorView, status: Optional[BufferView] = None,
                                     positions: Optional[TensorView] = None,
                                     cos_sin_cache: Optional[TensorView] = None, rotary_style: RotaryStyle = "neox",
                                     scale: float = 1.0) -> None: ...
    def record_mla_attention(self, cmd: CommandBuffer, layer: int, plan: MlaPlan, *, query: TensorView,
                             block_tables: Optional[TensorView] = None, context_lens: Optional[TensorView] = None,
                             query_starts: TensorView, output: TensorView, kv_indptr: Optional[TensorView] = None,
                             kv_indices: Optional[TensorView] = None, kv_last_page_len: Optional[TensorView] = None,
                             lse: Optional[TensorView] = None, tree_mask: Optional[TensorView] = None,
                             alibi_slopes: Optional[TensorView] = None, sinks: Optional[TensorView] = None,
                             scratch: Optional[BufferView] = None, status: Optional[BufferView] = None,
                             scale: Optional[float] = None, softcap: float = 0.0, k_scale: float = 1.0,
                             v_scale: float = 1.0) -> None: ...
    def record_gather(self, cmd: CommandBuffer, layer: int, *, block_tables: TensorView, seq_starts: TensorView,
                      key_out: TensorView, value_out: TensorView, status: Optional[BufferView] = None,
                      k_scale: float = 1.0, v_scale: float = 1.0) -> None: ...
    def record_copy_blocks(self, cmd: CommandBuffer, pairs: Pairs) -> None: ...
    def record_swap_out(self, cmd: CommandBuffer, pairs: Pairs) -> None: ...
    def record_swap_in(self, cmd: CommandBuffer, pairs: Pairs) -> None: ...

# ---- start-up: Context.prepare's descriptions ----
class AttentionBucket:
    def __init__(self, shape: AttentionShape, max_query_tokens: int = 0, *, kernel: AttentionKernel = "auto",
                 split: SplitMode = "auto", partition_tokens: int = 0) -> None: ...
    @property
    def shape(self) -> AttentionShape: ...
    @property
    def max_query_tokens(self) -> int: ...
    @property
    def kernel(self) -> AttentionKernel: ...
    @property
    def split(self) -> SplitMode: ...
    @property
    def partition_tokens(self) -> int: ...

class MlaBucket:
    def __init__(self, shape: MlaShape, max_query_tokens: int = 0, *, kernel: AttentionKernel = "auto",
                 split: SplitMode = "auto", partition_tokens: int = 0) -> None: ...
    @property
    def shape(self) -> MlaShape: ...
    @property
    def max_query_tokens(self) -> int: ...
    @property
    def kernel(self) -> AttentionKernel: ...
    @property
    def split(self) -> SplitMode: ...
    @property
    def partition_tokens(self) -> int: ...

class DecodeBucket:
    def __init__(self, shape: DecodeShape, *, sliding_window: int = 0, split: SplitMode = "auto",
                 partition_tokens: int = 0, kernel: DecodeKernel = "auto", order: DecodeOrder = "auto",
                 merge: DecodeMerge = "reduce_pass") -> None: ...
    @property
    def shape(self) -> DecodeShape: ...
    @property
    def sliding_window(self) -> int: ...
    @property
    def split(self) -> SplitMode: ...
    @property
    def partition_tokens(self) -> int: ...
    @property
    def kernel(self) -> DecodeKernel: ...
    @property
    def order(self) -> DecodeOrder: ...
    @property
    def merge(self) -> DecodeMerge: ...

class RotaryWrite:
    def __init__(self, rotary_dim: int, *, style: RotaryStyle = "neox", cos_sin_dtype: DType = "f32",
                 position_dtype: Literal["i64", "i32"] = "i64") -> None: ...
    @property
    def rotary_dim(self) -> int: ...
    @property
    def style(self) -> RotaryStyle: ...
    @property
    def cos_sin_dtype(self) -> DType: ...
    @property
    def position_dtype(self) -> DType: ...

class CacheWriteKind:
    def __init__(self, cache: KvCacheShape, num_blocks: int, *, token_dtype: DType = "f16",
                 slot_dtype: Literal["i64", "i32"] = "i64", rotary: Optional[RotaryWrite] = None) -> None: ...
    @staticmethod
    def of(cache: KvCache, token_dtype: DType = "f16", rotary: Optional[RotaryWrite] = None,
           slot_dtype: Literal["i64", "i32"] = "i64") -> CacheWriteKind: ...
    @property
    def cache(self) -> KvCacheShape: ...
    @property
    def num_blocks(self) -> int: ...
    @property
    def token_dtype(self) -> DType: ...
    @property
    def slot_dtype(self) -> DType: ...
    @property
    def rotary(self) -> Optional[RotaryWrite]: ...

class PrepareReport:
    @property
    def pipelines(self) -> int: ...
    @property
    def created(self) -> int: ...

# ---- the block manager ----
class BlockCopy:
    src: int
    dst: int
    def __init__(self, src: int, dst: int) -> None: ...
    def __iter__(self) -> Iterator[int]: ...

class AppendResult:
    @property
    def slot(self) -> int: ...
    @property
    def copy(self) -> Optional[BlockCopy]: ...

class BlockUsage:
    num_blocks: int
    in_use: int
    free: int
    cached: int
    num_host_blocks: int
    host_in_use: int

class PrefixCacheStats:
    queries: int
    queried_blocks: int
    hit_blocks: int
    queried_tokens: int
    hit_tokens: int

class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, *, watermark: float = 0.01,
                 enable_prefix_caching: bool = True, hash_salt: int = 0, num_host_blocks: int = 0) -> None: ...
    @property
    def block_size(self) -> int: ...
    def can_allocate(self, prompt: HostArray) -> Admission: ...
    def add_sequence(self, seq_id: int, prompt: HostArray) -> int: ...
    def can_append(self, seq_id: int) -> bool: ...
    def append_token(self, seq_id: int, token: int) -> AppendResult: ...
    def fork(self, parent_id: int, child_id: int) -> None: ...
    def free_sequence(self, seq_id: int) -> None: ...
    def preempt(self, seq_id: int) -> int: ...
    def can_swap_out(self, seq_ids: Union[int, Sequence[int]]) -> bool: ...
    def can_swap_in(self, seq_ids: Union[int, Sequence[int]]) -> Admission: ...
    def swap_out(self, seq_ids: Union[int, Sequence[int]]) -> list[BlockCopy]: ...
    def swap_in(self, seq_ids: Union[int, Sequence[int]]) -> list[BlockCopy]: ...
    def contains(self, seq_id: int) -> bool: ...
    def is_swapped(self, seq_id: int) -> bool: ...
    def context_len(self, seq_id: int) -> int: ...
    def block_table(self, seq_id: int, width: Optional[int] = None) -> npt.NDArray[np.int32]: ...
    def host_block_table(self, seq_id: int) -> npt.NDArray[np.int32]: ...
    def build_batch(self, seq_ids: Sequence[int],
                    width: int) -> Tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]: ...
    def slot_mapping(self, seq_id: int, first_token: int, count: int) -> npt.NDArray[np.int64]: ...
    @property
    def num_free_blocks(self) -> int: ...
    @property
    def num_cached_blocks(self) -> int: ...
    def usage(self) -> BlockUsage: ...
    def prefix_cache_stats(self) -> PrefixCacheStats: ...
    def ref_count(self, block: int, *, host: bool = False) -> int: ...
