# SPDX-License-Identifier: Apache-2.0
"""Devices, the Context (the environment read only when asked), the version, device buffers and
the element conversions."""
import importlib.metadata
import re

import numpy as np
import pytest

import vkpaged
from contract_math import bf16_bits, bf16_values, fp8_table


def test_devices_are_listed_and_chosen_by_index_or_name():
    listed = vkpaged.list_devices()
    assert listed.devices and 0 <= listed.default_index < len(listed.devices)
    for i, device in enumerate(listed.devices):
        assert device.index == i and device.name and device.type in ("discrete", "integrated", "virtual", "cpu",
                                                                     "other")
    chosen = listed.devices[-1]
    by_index = vkpaged.Context(chosen.index)
    assert by_index.device_info.name == chosen.name and by_index.device_info.push_descriptor
    assert vkpaged.Context(chosen.name).device_info.index == chosen.index
    assert vkpaged.Context(str(chosen.index), fence_timeout_ms=5000).fence_timeout_ms == 5000


def test_the_environment_is_read_only_when_asked(monkeypatch):
    monkeypatch.setenv("VKPAGED_DEVICE", "no-such-vulkan-device")
    default = vkpaged.list_devices()
    assert vkpaged.Context().device_info.index == default.default_index  # the variable is ignored
    with pytest.raises(vkpaged.InvalidArgumentError) as caught:
        vkpaged.Context(read_environment=True)
    assert str(caught.value) == 'VKPAGED_DEVICE: no Vulkan device name contains "no-such-vulkan-device"'
    # A device given wins over the variable: it is read only where device is ''.
    assert vkpaged.Context(default.default_index, read_environment=True).device_info.index == default.default_index


def test_the_version_is_the_librarys_and_the_packages():
    assert re.fullmatch(r"\d+\.\d+\.\d+", vkpaged.__version__)
    assert vkpaged.__version__ == vkpaged._core.__version__ == importlib.metadata.version("vkpaged")


def test_a_validated_context_counts_no_message_for_correct_work(rng):
    ctx = vkpaged.Context(validation=True)
    q = rng.uniform(-1, 1, (1, 2, 32)).astype(np.float32)
    k = rng.uniform(-1, 1, (1, 1, 8, 4, 4)).astype(np.float32)
    v = rng.uniform(-1, 1, (1, 1, 32, 4)).astype(np.float32)
    vkpaged.decode_attention(ctx, q, k, v, [[0]], [4])
    assert ctx.validation_message_count == 0


def test_buffers_round_trip_numpy_arrays(ctx, rng):
    for host_visible in (False, True):
        buffer = ctx.create_buffer(256, host_visible=host_visible)
        assert buffer.size == 256 and buffer.host_visible == host_visible
        data = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
        buffer.write(data, offset=64)
        np.testing.assert_array_equal(buffer.read("f32", (4, 8), offset=64), data)
        view = buffer.tensor("bf16", (2, 3), offset=16)
        bits = bf16_bits(rng.uniform(-1, 1, (2, 3)))
        view.write(bits)
        assert view.read().dtype == np.uint16 and (view.dtype, view.shape, view.offset) == ("bf16", (2, 3), 16)
        np.testing.assert_array_equal(view.read(), bits)
        assert view.memory.size == 12 and buffer.view(32, 8).size == 8
    copied = ctx.tensor_from(np.arange(5, dtype=np.int64))
    assert copied.dtype == "i64" and copied.shape == (5,)
    np.testing.assert_array_equal(copied.read(), np.arange(5))


def test_bf16_and_fp8_conversions_are_the_contracts(rng):
    x = np.concatenate([rng.uniform(-500, 500, 2000), [0.0, -0.0, 1e-9, 448.0, 449.0, 1e6, -1e6]])
    np.testing.assert_array_equal(vkpaged.float_to_bits(x, "bf16"), bf16_bits(x))
    np.testing.assert_array_equal(vkpaged.bits_to_float(bf16_bits(x), "bf16"), bf16_values(bf16_bits(x)))
    for name, top in (("fp8_e4m3", 448.0), ("fp8_e5m2", 57344.0)):
        table = fp8_table(name)
        codes = vkpaged.float_to_bits(x, name)
        assert codes.dtype == np.uint8 and vkpaged.dtype_max(name) == top
        values = table[codes]
        assert np.all(np.isfinite(values)) and np.max(np.abs(values)) <= top  # saturates, never Inf or NaN
        finite = np.flatnonzero(np.isfinite(table))
        nearest = np.abs(np.clip(x, -top, top)[:, None] - table[finite][None, :]).min(axis=1)
        np.testing.assert_array_equal(np.abs(values - np.clip(x, -top, top)), nearest)  # the nearest code
        np.testing.assert_array_equal(vkpaged.bits_to_float(np.arange(256, dtype=np.uint8), name).astype(np.float64),
                                      table.astype(np.float32).astype(np.float64))
    assert vkpaged.dtype_size("bf16") == 2 and vkpaged.cache_pack_factor("fp8_e4m3") == 16
    with pytest.raises(vkpaged.InvalidArgumentError, match="dtype: 'i32' is not a floating-point dtype"):
        vkpaged.float_to_bits(x, "i32")
