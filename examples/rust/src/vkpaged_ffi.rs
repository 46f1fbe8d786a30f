//! The part of include/vkpaged/vkpaged.h this example uses, declared by hand: #[repr(C)]
//! structs with the C field order and types, opaque handles as empty enums. The library is
//! linked by the build (rustc -l vkpaged, or build.rs).
//!
//! The C ABI's rules (docs/api.md, "The C ABI") as they show here: enums are 32-bit integers,
//! booleans are u32 (0 or 1), and every extensible struct begins with `struct_size`, which
//! `init_struct` sets to this declaration's size (and the library checks) before anything else
//! is filled in. The sizes are asserted at compile time against tests/c_api/abi_table.inc, so
//! a mirror that drifted from vkpaged.h does not build.
#![allow(dead_code)]

use std::os::raw::{c_char, c_int, c_void};

/// VKPAGED_MAKE_VERSION(0, 2, 0): the version these declarations mirror.
pub const VKPAGED_VERSION: u32 = 200;

pub type VkpStatus = c_int;
pub const VKP_OK: VkpStatus = 0;

/// vkp_bool32: 0 or 1.
pub type VkpBool32 = u32;

pub type VkpDtype = c_int;
pub const VKP_DTYPE_F32: VkpDtype = 0;
pub const VKP_DTYPE_I32: VkpDtype = 5;

pub type VkpSplitMode = c_int;

/// vkp_decode_kernel: which decode kernel a plan uses.
pub type VkpDecodeKernel = c_int;
pub const VKP_KERNEL_AUTOMATIC: VkpDecodeKernel = 0;
pub const VKP_KERNEL_SCALAR: VkpDecodeKernel = 1;
pub const VKP_KERNEL_MATRIX: VkpDecodeKernel = 2;

/// vkp_decode_order: the order in which a plan's workgroups take their items.
pub type VkpDecodeOrder = c_int;
pub const VKP_ORDER_AUTOMATIC: VkpDecodeOrder = 0;
pub const VKP_ORDER_GRID: VkpDecodeOrder = 1;
pub const VKP_ORDER_LONGEST_FIRST: VkpDecodeOrder = 2;

/// vkp_decode_merge: where a split decode merges its partitions.
pub type VkpDecodeMerge = c_int;
pub const VKP_MERGE_REDUCE_PASS: VkpDecodeMerge = 0;
pub const VKP_MERGE_IN_DISPATCH: VkpDecodeMerge = 1;

pub const VKP_MAX_RANK: usize = 5;

/// Opaque vkp_context.
pub enum VkpContext {}

#[repr(C)]
pub struct VkpHostTensor {
    pub data: *mut c_void,
    pub dtype: VkpDtype,
    pub rank: i32,
    pub shape: [i64; VKP_MAX_RANK],
}

impl VkpHostTensor {
    /// Absent (optional) tensor: data NULL, rank 0.
    pub fn absent() -> Self {
        VkpHostTensor { data: std::ptr::null_mut(), dtype: VKP_DTYPE_F32, rank: 0, shape: [0; VKP_MAX_RANK] }
    }
    /// Describes `values` with a shape; the C API only reads inputs.
    pub fn of<T>(values: &[T], dtype: VkpDtype, dims: &[i64]) -> Self {
        let mut shape = [0i64; VKP_MAX_RANK];
        shape[..dims.len()].copy_from_slice(dims);
        assert_eq!(dims.iter().product::<i64>() as usize, values.len());
        VkpHostTensor { data: values.as_ptr() as *mut c_void, dtype, rank: dims.len() as i32, shape }
    }
}

#[repr(C)]
pub struct VkpDecodeInputs {
    pub struct_size: u32,
    pub cache_dtype: VkpDtype,
    pub query: VkpHostTensor,
    pub key_cache: VkpHostTensor,
    pub value_cache: VkpHostTensor,
    pub block_tables: VkpHostTensor,
    pub context_lens: VkpHostTensor,
    pub alibi_slopes: VkpHostTensor,
    pub sinks: VkpHostTensor,
    /// FlashInfer's CSR page tables, in place of block_tables and context_lens (absent here).
    pub kv_indptr: VkpHostTensor,
    pub kv_indices: VkpHostTensor,
    pub kv_last_page_len: VkpHostTensor,
    pub max_blocks_per_seq: u32,
    pub reserved0: u32,
}

/// What shapes a decode plan beside its shape (vkp_decode_options).
#[repr(C)]
pub struct VkpDecodeOptions {
    pub struct_size: u32,
    pub sliding_window: u32,
    pub split: VkpSplitMode,
    pub partition_tokens: u32,
    pub kernel: VkpDecodeKernel,
    pub order: VkpDecodeOrder,
    pub merge: VkpDecodeMerge,
}

/// The per-call values of one decode (vkp_decode_params): scale, soft cap, fp8 scales.
#[repr(C)]
pub struct VkpDecodeParams {
    pub struct_size: u32,
    pub has_scale: VkpBool32,
    pub scale: f32,
    pub softcap: f32,
    pub k_scale: f32,
    pub v_scale: f32,
}

#[repr(C)]
pub struct VkpDeviceInfo {
    pub struct_size: u32,
    pub index: u32,
    pub name: [c_char; 256],
    pub device_type: [c_char; 16],
    pub driver: [c_char; 256],
    pub vendor_id: u32,
    pub api_version: u32,
    pub subgroup_size: u32,
    pub subgroup_arithmetic: VkpBool32,
    pub storage_16bit: VkpBool32,
    pub storage_8bit: VkpBool32,
    pub shader_float16: VkpBool32,
    pub shader_int64: VkpBool32,
    pub buffer_device_address: VkpBool32,
    pub push_descriptor: VkpBool32,
    pub timestamps: VkpBool32,
    pub max_shared_memory: u32,
    pub max_storage_buffer_range: u64,
    pub max_workgroup_invocations: u32,
    pub max_push_constants: u32,
    pub min_storage_buffer_offset_alignment: u32,
    pub compute_units: u32,
    pub compute_units_reported: VkpBool32,
    pub timestamp_valid_bits: u32,
    pub timestamp_period_ns: f64,
    pub device_local_bytes: u64,
    pub subgroup_shuffle: VkpBool32,
    pub memory_budget: VkpBool32,
    pub device_local_free_bytes: u64,
    pub cooperative_matrix: VkpBool32,
    pub cooperative_matrix_khr: VkpBool32,
    pub max_memory_allocation_size: u64,
    pub vulkan_memory_model: VkpBool32,
    pub vulkan_memory_model_device_scope: VkpBool32,
}

// The sizes of tests/c_api/abi_table.inc (x86-64): a field missed or mistyped fails the build.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<VkpHostTensor>() == 56);
    assert!(std::mem::size_of::<VkpDecodeInputs>() == 576);
    assert!(std::mem::size_of::<VkpDecodeOptions>() == 28);
    assert!(std::mem::size_of::<VkpDecodeParams>() == 24);
    assert!(std::mem::size_of::<VkpDeviceInfo>() == 672);
};

/// The `vkp_<struct>_init_sized` of an extensible struct.
pub type InitSized<T> = unsafe extern "C" fn(*mut T, u32) -> VkpStatus;

/// A struct as `init_sized` fills it for this declaration's size: struct_size set, defaults in.
pub fn init_struct<T>(init_sized: InitSized<T>) -> Result<T, VkpStatus> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let status = unsafe { init_sized(value.as_mut_ptr(), std::mem::size_of::<T>() as u32) };
    if status != VKP_OK {
        return Err(status);
    }
    Ok(unsafe { value.assume_init() })
}

extern "C" {
    pub fn vkp_version() -> u32;
    pub fn vkp_version_string() -> *const c_char;
    pub fn vkp_last_error() -> *const c_char;
    pub fn vkp_status_name(status: VkpStatus) -> *const c_char;

    /// options: NULL for the defaults (this example does not mirror vkp_context_options).
    pub fn vkp_context_create(options: *const c_void, out: *mut *mut VkpContext) -> VkpStatus;
    pub fn vkp_context_destroy(context: *mut VkpContext);
    pub fn vkp_context_device_info(context: *const VkpContext, out: *mut VkpDeviceInfo) -> VkpStatus;

    pub fn vkp_device_info_init_sized(info: *mut VkpDeviceInfo, struct_size: u32) -> VkpStatus;
    pub fn vkp_decode_inputs_init_sized(inputs: *mut VkpDecodeInputs, struct_size: u32) -> VkpStatus;
    pub fn vkp_decode_options_init_sized(options: *mut VkpDecodeOptions, struct_size: u32) -> VkpStatus;
    pub fn vkp_decode_params_init_sized(params: *mut VkpDecodeParams, struct_size: u32) -> VkpStatus;
    pub fn vkp_decode_attention(
        context: *mut VkpContext,
        inputs: *const VkpDecodeInputs,
        options: *const VkpDecodeOptions,
        params: *const VkpDecodeParams,
        output: *mut c_void,
        output_bytes: usize,
        lse: *mut f32,
        lse_count: usize,
    ) -> VkpStatus;
    pub fn vkp_reference_decode_attention(
        inputs: *const VkpDecodeInputs,
        options: *const VkpDecodeOptions,
        params: *const VkpDecodeParams,
        output: *mut c_void,
        output_bytes: usize,
        lse: *mut f32,
        lse_count: usize,
    ) -> VkpStatus;
}
