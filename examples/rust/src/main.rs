//! vkpaged from Rust through the C API: decode attention over a paged f32 KV cache (MQA, a
//! sliding window and a soft cap) on the default Vulkan device, checked against the CPU
//! reference. Prints one line; exits non-zero on any error or mismatch.
mod vkpaged_ffi;

use std::ffi::CStr;
use std::os::raw::c_void;
use std::process::ExitCode;
use vkpaged_ffi::*;

const S: usize = 2; // sequences
const H: usize = 4; // query heads
const HKV: usize = 1; // one kv head: multi-query attention
const D: usize = 32; // head size
const B: usize = 8; // tokens per block
const N: usize = 12; // blocks in the cache
const X: usize = 4; // f32 elements in 16 bytes
const M: usize = 7; // block-table columns

fn check(status: VkpStatus, what: &str) -> Result<(), String> {
    if status == VKP_OK {
        return Ok(());
    }
    // Both strings are owned by the library and valid until the next call on this thread.
    let (name, message) = unsafe {
        (CStr::from_ptr(vkp_status_name(status)), CStr::from_ptr(vkp_last_error()))
    };
    Err(format!("{} failed ({}): {}", what, name.to_string_lossy(), message.to_string_lossy()))
}

/// An extensible struct as its init fills it, or the library's message.
fn init<T>(init_sized: InitSized<T>, what: &str) -> Result<T, String> {
    init_struct(init_sized).map_err(|status| check(status, what).unwrap_err())
}

/// Reproducible values in (-1, 1).
fn values(count: usize, seed: &mut u32) -> Vec<f32> {
    (0..count)
        .map(|_| {
            *seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (*seed >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Closes the context however `run` returns.
struct Context(*mut VkpContext);
impl Drop for Context {
    fn drop(&mut self) {
        unsafe { vkp_context_destroy(self.0) }
    }
}

fn run() -> Result<bool, String> {
    let version = unsafe { CStr::from_ptr(vkp_version_string()) }.to_string_lossy().into_owned();
    if unsafe { vkp_version() } != VKPAGED_VERSION {
        return Err(format!("these declarations mirror vkpaged 0.2.0, the library is {}", version));
    }

    let mut seed = 11u32;
    let query = values(S * H * D, &mut seed);
    let key_cache = values(N * HKV * D * B, &mut seed);
    let value_cache = values(N * HKV * D * B, &mut seed);
    // Sequence 0 holds 9 tokens in blocks 3 and 10; sequence 1 holds 50 in seven others.
    let context_lens: [i32; S] = [9, 50];
    let block_tables: [i32; S * M] = [3, 10, 0, 0, 0, 0, 0, 11, 0, 1, 2, 4, 5, 6];

    // Extensible structs start from their init: struct_size and the defaults (absent ALiBi
    // slopes and sinks, no scale given, ...), then the fields this example sets.
    let mut inputs = init(vkp_decode_inputs_init_sized, "vkp_decode_inputs_init")?;
    inputs.query = VkpHostTensor::of(&query, VKP_DTYPE_F32, &[S as i64, H as i64, D as i64]);
    inputs.key_cache = VkpHostTensor::of(&key_cache, VKP_DTYPE_F32, &[N as i64, HKV as i64, (D / X) as i64, B as i64, X as i64]);
    inputs.value_cache = VkpHostTensor::of(&value_cache, VKP_DTYPE_F32, &[N as i64, HKV as i64, D as i64, B as i64]);
    inputs.block_tables = VkpHostTensor::of(&block_tables, VKP_DTYPE_I32, &[S as i64, M as i64]);
    inputs.context_lens = VkpHostTensor::of(&context_lens, VKP_DTYPE_I32, &[S as i64]);
    inputs.cache_dtype = VKP_DTYPE_F32;
    // What shapes the plan (the window) and the per-call values (the soft cap's value, which
    // also gives the convenience path's plan its soft cap).
    let mut options = init(vkp_decode_options_init_sized, "vkp_decode_options_init")?;
    options.sliding_window = 32;
    let mut params = init(vkp_decode_params_init_sized, "vkp_decode_params_init")?;
    params.softcap = 30.0;

    let mut context = Context(std::ptr::null_mut());
    check(unsafe { vkp_context_create(std::ptr::null(), &mut context.0) }, "vkp_context_create")?;
    let mut info = init(vkp_device_info_init_sized, "vkp_device_info_init")?;
    check(unsafe { vkp_context_device_info(context.0, &mut info) }, "vkp_context_device_info")?;
    let device = unsafe { CStr::from_ptr(info.name.as_ptr()) }.to_string_lossy().into_owned();
    // The struct's last field, which Vulkan 1.1 guarantees to be at least 1 GiB: a mirror of
    // vkp_device_info that drifted from vkpaged.h would read something else here.
    if info.max_memory_allocation_size < (1u64 << 30) {
        return Err(format!(
            "vkp_device_info: max_memory_allocation_size {} is below 1 GiB: VkpDeviceInfo does not match vkpaged.h",
            info.max_memory_allocation_size
        ));
    }

    let mut output = vec![0f32; S * H * D];
    let mut expected = vec![0f32; S * H * D];
    let bytes = output.len() * std::mem::size_of::<f32>();
    check(
        unsafe {
            vkp_decode_attention(
                context.0,
                &inputs,
                &options,
                &params,
                output.as_mut_ptr() as *mut c_void,
                bytes,
                std::ptr::null_mut(),
                0,
            )
        },
        "vkp_decode_attention",
    )?;
    check(
        unsafe {
            vkp_reference_decode_attention(
                &inputs,
                &options,
                &params,
                expected.as_mut_ptr() as *mut c_void,
                bytes,
                std::ptr::null_mut(),
                0,
            )
        },
        "vkp_reference_decode_attention",
    )?;

    let mut worst = 0f64;
    let mut ok = true;
    for (got, want) in output.iter().zip(expected.iter()) {
        let diff = (*got as f64 - *want as f64).abs();
        ok &= diff <= 1e-4; // the contract's f32 tolerance; a NaN fails too
        worst = worst.max(diff);
    }
    println!(
        "vkpaged Rust example: decode of {} sequences (MQA, sliding window 32, soft cap 30) on {} with vkpaged {}: max |gpu - reference| = {:.2e} -> {}",
        S, device, version, worst, if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("vkpaged Rust example: {}", message);
            ExitCode::FAILURE
        }
    }
}
