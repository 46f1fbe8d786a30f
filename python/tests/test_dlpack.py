# SPDX-License-Identifier: Apache-2.0
"""Host arrays through DLPack: any object with __dlpack__ on the CPU is taken (numpy's own
arrays, wrapped so that only the protocol shows; a bfloat16 tensor made by hand), and what the
protocol says cannot be taken is refused."""
import ctypes

import numpy as np
import pytest

import vkpaged
from contract_math import TOLERANCE, attention, bf16_bits, stored_values
from steps import build_step


class DLPackOnly:
    """An array that shows nothing but the DLPack protocol (as a torch CPU tensor or another
    framework's array would)."""

    def __init__(self, array, device=(1, 0)):
        self._array, self._device = array, device

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._device


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int), ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class Bfloat16Tensor:
    """A DLPack producer of a kDLBfloat (code 4) 16-bit tensor over uint16 bits, as torch.bfloat16
    exports: the bits are taken as bf16 without a dtype argument."""

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, np.uint16)
        self.shape = (ctypes.c_int64 * self.bits.ndim)(*self.bits.shape)
        self.managed = DLManagedTensor()  # kept alive by this object; no deleter to call
        t = self.managed.dl_tensor
        t.data, t.device_type, t.ndim = self.bits.ctypes.data, 1, self.bits.ndim
        t.dtype = DLDataType(4, 16, 1)
        t.shape = self.shape

    def __dlpack__(self, stream=None):
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                                       ctypes.c_void_p]
        return new_capsule(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_arrays_give_what_numpy_arrays_give(ctx, rng):
    step = build_step(rng, [(9, 4), (3, 1)], "nhd", "f16", "f16")
    args = (step.key_cache, step.value_cache, step.block_tables, step.context_lens, step.query_starts)
    direct = vkpaged.batch_attention(ctx, step.query, *args, kv_layout="nhd")
    wrapped = vkpaged.batch_attention(ctx, DLPackOnly(step.query), *(DLPackOnly(a) for a in args), kv_layout="nhd")
    np.testing.assert_array_equal(wrapped, direct)
    want, _ = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    np.testing.assert_allclose(direct.astype(np.float64), want, atol=TOLERANCE["f16"], rtol=0)


def test_a_dlpack_bfloat16_tensor_is_taken_as_bf16(ctx, rng):
    step = build_step(rng, [(6, 3)], "hnd", "bf16", "bf16")
    args = (step.block_tables, step.context_lens, step.query_starts)
    out = vkpaged.batch_attention(ctx, Bfloat16Tensor(step.query), Bfloat16Tensor(step.key_cache),
                                  Bfloat16Tensor(step.value_cache), *args, kv_layout="hnd")
    same = vkpaged.batch_attention(ctx, step.query, step.key_cache, step.value_cache, *args, query_dtype="bf16",
                                   cache_dtype="bf16", kv_layout="hnd")
    np.testing.assert_array_equal(out, same)
    assert out.dtype == np.uint16
    want, _ = attention(step.q, step.k, step.v, *args)
    np.testing.assert_allclose(stored_values(out, "bf16"), want, atol=TOLERANCE["bf16"], rtol=0)
    np.testing.assert_array_equal(vkpaged.bits_to_float(Bfloat16Tensor(bf16_bits([1.5, -2.0])), "bf16"), [1.5, -2.0])


def test_what_dlpack_cannot_give_is_refused(ctx):
    on_gpu = DLPackOnly(np.zeros((2, 4, 32), np.float16), device=(2, 0))  # kDLCUDA
    with pytest.raises(vkpaged.InvalidArgumentError, match="query: a DLPack tensor on device type 2"):
        vkpaged.decode_attention(ctx, on_gpu, np.zeros((1, 2, 4, 4, 8), np.float16),
                                 np.zeros((1, 2, 32, 4), np.float16), [[0], [0]], [1, 1])
    strided = DLPackOnly(np.zeros((32, 4), np.float32).T)  # a transposed view: not C-contiguous
    with pytest.raises(vkpaged.InvalidArgumentError, match="array: a DLPack tensor that is not C-contiguous"):
        ctx.tensor_from(strided)
