#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""vkpaged from Python through the C API, with ctypes and nothing outside the standard library:
decode attention over a paged f32 KV cache (GQA, attention sinks, the LSE) on the default Vulkan
device, checked against the contract's math written out here. Prints one line; exits non-zero on
any error or mismatch.

    python3 decode_example.py [path/to/libvkpaged.so]

Without a path: the VKPAGED_LIBRARY environment variable, else the loader's search for
libvkpaged.so. A numpy array or torch CPU tensor passes the same way as the arrays here: give
its data pointer (arr.ctypes.data, t.data_ptr()) to HostTensor.
"""
import array
import ctypes
import ctypes.util
import math
import os
import sys

# ---- the part of include/vkpaged/vkpaged.h this example uses, with the C field order ----
# The C ABI's rules (docs/api.md, "The C ABI") as they show here: enums are 32-bit ints,
# booleans are uint32 (0 or 1), and every extensible struct begins with struct_size, which
# init() sets to ctypes.sizeof of the declaration here (the library refuses any size no release
# had). The sizes are checked against tests/c_api/abi_table.inc when the module loads.

VKPAGED_VERSION = 200  # VKPAGED_MAKE_VERSION(0, 2, 0): the version these declarations mirror
VKP_OK = 0
VKP_DTYPE_F32, VKP_DTYPE_I32 = 0, 5
VKP_MAX_RANK = 5


class HostTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * VKP_MAX_RANK)]


class DecodeInputs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("cache_dtype", ctypes.c_int), ("query", HostTensor),
                ("key_cache", HostTensor), ("value_cache", HostTensor), ("block_tables", HostTensor),
                ("context_lens", HostTensor), ("alibi_slopes", HostTensor), ("sinks", HostTensor),
                ("kv_indptr", HostTensor), ("kv_indices", HostTensor), ("kv_last_page_len", HostTensor),
                ("max_blocks_per_seq", ctypes.c_uint32), ("reserved0", ctypes.c_uint32)]


class DecodeOptions(ctypes.Structure):
    """What shapes the plan beside its shape (vkp_decode_options)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("sliding_window", ctypes.c_uint32), ("split", ctypes.c_int),
                ("partition_tokens", ctypes.c_uint32), ("kernel", ctypes.c_int), ("order", ctypes.c_int),
                ("merge", ctypes.c_int)]


class DecodeParams(ctypes.Structure):
    """The per-call values of one decode (vkp_decode_params)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("has_scale", ctypes.c_uint32), ("scale", ctypes.c_float),
                ("softcap", ctypes.c_float), ("k_scale", ctypes.c_float), ("v_scale", ctypes.c_float)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("index", ctypes.c_uint32), ("name", ctypes.c_char * 256),
                ("type", ctypes.c_char * 16), ("driver", ctypes.c_char * 256), ("vendor_id", ctypes.c_uint32),
                ("api_version", ctypes.c_uint32), ("subgroup_size", ctypes.c_uint32),
                ("subgroup_arithmetic", ctypes.c_uint32), ("storage_16bit", ctypes.c_uint32),
                ("storage_8bit", ctypes.c_uint32), ("shader_float16", ctypes.c_uint32),
                ("shader_int64", ctypes.c_uint32), ("buffer_device_address", ctypes.c_uint32),
                ("push_descriptor", ctypes.c_uint32), ("timestamps", ctypes.c_uint32),
                ("max_shared_memory", ctypes.c_uint32), ("max_storage_buffer_range", ctypes.c_uint64),
                ("max_workgroup_invocations", ctypes.c_uint32), ("max_push_constants", ctypes.c_uint32),
                ("min_storage_buffer_offset_alignment", ctypes.c_uint32), ("compute_units", ctypes.c_uint32),
                ("compute_units_reported", ctypes.c_uint32), ("timestamp_valid_bits", ctypes.c_uint32),
                ("timestamp_period_ns", ctypes.c_double), ("device_local_bytes", ctypes.c_uint64),
                ("subgroup_shuffle", ctypes.c_uint32), ("memory_budget", ctypes.c_uint32),
                ("device_local_free_bytes", ctypes.c_uint64), ("cooperative_matrix", ctypes.c_uint32),
                ("cooperative_matrix_khr", ctypes.c_uint32), ("max_memory_allocation_size", ctypes.c_uint64),
                ("vulkan_memory_model", ctypes.c_uint32), ("vulkan_memory_model_device_scope", ctypes.c_uint32)]


# tests/c_api/abi_table.inc's sizes (x86-64): a declaration that drifted from vkpaged.h stops here.
if ctypes.sizeof(ctypes.c_void_p) == 8:
    for struct, size in ((HostTensor, 56), (DecodeInputs, 576), (DecodeOptions, 28), (DecodeParams, 24),
                         (DeviceInfo, 672)):
        assert ctypes.sizeof(struct) == size, f"{struct.__name__}: {ctypes.sizeof(struct)} bytes, vkpaged.h has {size}"


def load_library(path):
    path = path or os.environ.get("VKPAGED_LIBRARY") or ctypes.util.find_library("vkpaged")
    if not path:
        raise RuntimeError("libvkpaged.so not found: pass its path or set VKPAGED_LIBRARY")
    lib = ctypes.CDLL(path)
    lib.vkp_version.restype = ctypes.c_uint32
    lib.vkp_version_string.restype = ctypes.c_char_p
    lib.vkp_last_error.restype = ctypes.c_char_p
    lib.vkp_status_name.restype = ctypes.c_char_p
    lib.vkp_status_name.argtypes = [ctypes.c_int]
    lib.vkp_context_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.vkp_context_destroy.argtypes = [ctypes.c_void_p]
    lib.vkp_context_destroy.restype = None
    lib.vkp_context_device_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(DeviceInfo)]
    for struct, init in ((DecodeInputs, lib.vkp_decode_inputs_init_sized),
                         (DecodeOptions, lib.vkp_decode_options_init_sized),
                         (DecodeParams, lib.vkp_decode_params_init_sized),
                         (DeviceInfo, lib.vkp_device_info_init_sized)):
        init.argtypes = [ctypes.POINTER(struct), ctypes.c_uint32]
        init.restype = ctypes.c_int
    lib.vkp_decode_attention.argtypes = [ctypes.c_void_p, ctypes.POINTER(DecodeInputs),
                                         ctypes.POINTER(DecodeOptions), ctypes.POINTER(DecodeParams),
                                         ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_float),
                                         ctypes.c_size_t]
    return lib


def check(lib, status, what):
    if status != VKP_OK:
        # Both strings belong to the library and stay valid until its next call on this thread.
        raise RuntimeError(f"{what} failed ({lib.vkp_status_name(status).decode()}): "
                           f"{lib.vkp_last_error().decode()}")


def init(lib, struct, init_sized):
    """An extensible struct as vkp_<struct>_init fills it: struct_size and the defaults."""
    value = struct()
    check(lib, init_sized(ctypes.byref(value), ctypes.sizeof(struct)), init_sized.__name__)
    return value


def tensor(values, dtype, dims):
    """A vkp_host_tensor over an array.array (the C API only reads inputs)."""
    assert math.prod(dims) == len(values)
    address, _ = values.buffer_info()
    return HostTensor(address, dtype, len(dims), (ctypes.c_int64 * VKP_MAX_RANK)(*dims))


# ---- the problem: 3 sequences, GQA (4 query heads share each of 2 kv heads), f32 cache ----

S, H, HKV, D, B, N, M = 3, 8, 2, 32, 16, 16, 5
X = 4  # f32 elements in one 16-byte key chunk: keys are [N, Hkv, D/X, B, X]


class Values:
    """Reproducible f32 values in (-1, 1), drawn in turn."""

    def __init__(self, seed):
        self.state = seed

    def take(self, count):
        out = array.array("f")
        for _ in range(count):
            self.state = (self.state * 1664525 + 1013904223) % (1 << 32)
            out.append((self.state >> 8) / float(1 << 23) - 1.0)
        return out


def contract_decode(query, keys, values, tables, lens, sinks, scale):
    """docs/contract.md's math for this case, in double precision; also the LSE."""
    out, lse = [0.0] * (S * H * D), [0.0] * (S * H)
    for s in range(S):
        for h in range(H):
            g = h // (H // HKV)
            q = query[(s * H + h) * D:(s * H + h + 1) * D]
            logits, rows = [], []
            for t in range(lens[s]):
                block, off = tables[s * M + t // B], t % B
                k = [keys[(((block * HKV + g) * (D // X) + d // X) * B + off) * X + d % X] for d in range(D)]
                logits.append(scale * sum(a * b for a, b in zip(q, k)))
                rows.append([values[((block * HKV + g) * D + d) * B + off] for d in range(D)])
            m = max(logits + [sinks[h]])
            weights = [math.exp(l - m) for l in logits]
            den = sum(weights) + math.exp(sinks[h] - m)
            for d in range(D):
                out[(s * H + h) * D + d] = sum(w * r[d] for w, r in zip(weights, rows)) / den
            lse[s * H + h] = m + math.log(den)
    return out, lse


def run(lib):
    version = lib.vkp_version_string().decode()
    if lib.vkp_version() != VKPAGED_VERSION:
        raise RuntimeError(f"these declarations mirror vkpaged 0.2.0, the library is {version}")

    draw = Values(seed=7)
    query = draw.take(S * H * D)
    keys = draw.take(N * HKV * D * B)
    values = draw.take(N * HKV * D * B)
    sinks = draw.take(H)
    # Lengths 1 (one token), 17 (one past a block) and 70 (five blocks, the last part-filled),
    # in blocks handed out in no order; unused table entries hold valid but unrelated ids.
    lens = array.array("i", [1, 17, 70])
    tables = array.array("i", [9, 0, 0, 0, 0,
                               4, 12, 0, 0, 0,
                               15, 2, 7, 11, 5])

    inputs = init(lib, DecodeInputs, lib.vkp_decode_inputs_init_sized)  # alibi_slopes absent
    inputs.query = tensor(query, VKP_DTYPE_F32, [S, H, D])
    inputs.key_cache = tensor(keys, VKP_DTYPE_F32, [N, HKV, D // X, B, X])
    inputs.value_cache = tensor(values, VKP_DTYPE_F32, [N, HKV, D, B])
    inputs.block_tables = tensor(tables, VKP_DTYPE_I32, [S, M])
    inputs.context_lens = tensor(lens, VKP_DTYPE_I32, [S])
    inputs.sinks = tensor(sinks, VKP_DTYPE_F32, [H])
    inputs.cache_dtype = VKP_DTYPE_F32
    options = init(lib, DecodeOptions, lib.vkp_decode_options_init_sized)  # automatic split and kernel
    params = init(lib, DecodeParams, lib.vkp_decode_params_init_sized)  # the per-call values
    scale = 0.2  # a logit scale of our own (the default is 1 / sqrt(D))
    params.has_scale, params.scale = 1, scale

    context = ctypes.c_void_p()
    check(lib, lib.vkp_context_create(None, ctypes.byref(context)), "vkp_context_create")
    try:
        info = init(lib, DeviceInfo, lib.vkp_device_info_init_sized)
        check(lib, lib.vkp_context_device_info(context, ctypes.byref(info)), "vkp_context_device_info")
        # The struct's last field, at least 1 GiB by Vulkan 1.1: a mirror that drifted from
        # vkpaged.h reads something else here.
        if info.max_memory_allocation_size < (1 << 30):
            raise RuntimeError(f"vkp_device_info: max_memory_allocation_size {info.max_memory_allocation_size} "
                               "is below 1 GiB: DeviceInfo does not match vkpaged.h")
        output = (ctypes.c_float * (S * H * D))()
        lse = (ctypes.c_float * (S * H))()
        check(lib, lib.vkp_decode_attention(context, ctypes.byref(inputs), ctypes.byref(options),
                                            ctypes.byref(params), output, ctypes.sizeof(output), lse, len(lse)),
              "vkp_decode_attention")
    finally:
        lib.vkp_context_destroy(context)

    want, want_lse = contract_decode(query, keys, values, tables, lens, sinks, scale)
    worst = max(abs(a - b) for a, b in zip(output, want))
    worst_lse = max(abs(a - b) for a, b in zip(lse, want_lse))
    ok = worst <= 1e-4 and worst_lse <= 1e-4  # docs/contract.md: f32 storage 1e-4 absolute
    print(f"vkpaged Python example: decode of {S} sequences (GQA {H}/{HKV}, sinks, LSE, scale {scale}) on "
          f"{info.name.decode()} with vkpaged {version}: max |gpu - contract| = {worst:.2e}, "
          f"LSE {worst_lse:.2e} -> {'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    try:
        return 0 if run(load_library(sys.argv[1] if len(sys.argv) > 1 else None)) else 1
    except (RuntimeError, OSError) as e:
        print(f"vkpaged Python example: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
