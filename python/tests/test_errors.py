# SPDX-License-Identifier: Apache-2.0
"""vkpaged::Error surfaces as the exception class of its ErrorCode, all deriving from
vkpaged.Error, carrying the library's message (the argument and the value)."""
import numpy as np
import pytest

import vkpaged
from steps import build_step

CLASSES = {
    vkpaged.ErrorCode.invalid_argument: vkpaged.InvalidArgumentError,
    vkpaged.ErrorCode.unsupported: vkpaged.UnsupportedError,
    vkpaged.ErrorCode.out_of_memory: vkpaged.OutOfMemoryError,
    vkpaged.ErrorCode.device_error: vkpaged.DeviceError,
    vkpaged.ErrorCode.io_error: vkpaged.IoError,
    vkpaged.ErrorCode.internal: vkpaged.InternalError,
}


def test_one_class_per_error_code_named_as_the_library_names_it():
    assert set(CLASSES) == set(vkpaged.ErrorCode)
    for code, cls in CLASSES.items():
        assert issubclass(cls, vkpaged.Error) and cls.code == code
        assert vkpaged._core.error_code_name(int(code)) == code.name
    assert issubclass(vkpaged.InvalidArgumentError, ValueError)


def test_a_refused_plan_raises_invalid_argument_with_the_librarys_message(ctx):
    shape = vkpaged.DecodeShape(num_seqs=1, num_heads=4, num_kv_heads=2, head_size=33, block_size=16, num_blocks=4,
                                max_blocks_per_seq=2)
    with pytest.raises(vkpaged.InvalidArgumentError) as caught:
        vkpaged.DecodePlan(ctx, shape)
    assert str(caught.value) == "head_size: 33 is not supported (multiples of 8 from 32 to 256, and 512)"
    assert caught.value.message == str(caught.value)
    assert caught.value.code == vkpaged.ErrorCode.invalid_argument


def test_host_path_input_errors_name_the_argument(ctx, rng):
    step = build_step(rng, [(5, 1)], "vllm", "f16", "f16")
    args = [step.query, step.key_cache, step.value_cache, step.block_tables]
    too_long = np.array([10_000], np.int32)
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"context_lens\[0\]: 10000"):
        vkpaged.decode_attention(ctx, *args, too_long)
    with pytest.raises(vkpaged.InvalidArgumentError, match="scale"):
        vkpaged.decode_attention(ctx, *args, step.context_lens, scale=-1.0)
    with pytest.raises(vkpaged.InvalidArgumentError, match="kv_layout: 'xyz' is not one of vllm, nhd, hnd"):
        vkpaged.decode_attention(ctx, *args, step.context_lens, kv_layout="xyz")
    with pytest.raises(vkpaged.InvalidArgumentError, match="query: a uint16 array: say dtype 'bf16'"):
        vkpaged.decode_attention(ctx, step.query.view(np.uint16), *args[1:], step.context_lens)
    with pytest.raises(vkpaged.InvalidArgumentError, match="key_cache: a uint8 array: say cache_dtype"):
        vkpaged.decode_attention(ctx, step.query, step.key_cache.view(np.uint8), step.value_cache.view(np.uint8),
                                 step.block_tables, step.context_lens)
    with pytest.raises(vkpaged.InvalidArgumentError, match="float64 is not an element type"):
        vkpaged.decode_attention(ctx, step.query.astype(np.float64), *args[1:], step.context_lens)


def test_buffer_misuse_is_refused(ctx):
    buffer = ctx.create_buffer(64)
    with pytest.raises(vkpaged.InvalidArgumentError, match="lies outside|fit"):
        buffer.tensor("f32", (32,))
    view = buffer.tensor("f32", (16,))
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"shape \[8\] where the view is \[16\]"):
        view.write(np.zeros(8, np.float32))
    with pytest.raises(vkpaged.InvalidArgumentError, match="an array of float16 where dtype f32"):
        view.write(np.zeros(16, np.float16))


def test_an_unsupported_kernel_or_device_raises_its_class(ctx):
    if not ctx.device_info.cooperative_matrix_khr:
        shape = vkpaged.AttentionShape(num_requests=1, num_query_tokens=4, num_heads=4, num_kv_heads=2, head_size=64,
                                       block_size=16, num_blocks=4, max_blocks_per_seq=2)
        with pytest.raises(vkpaged.UnsupportedError) as caught:
            vkpaged.AttentionPlan(ctx, shape, [0, 4], kernel="matrix")
        assert caught.value.message
    with pytest.raises(vkpaged.Error, match="no-such-device"):
        vkpaged.Context("no-such-device")


def test_running_out_of_blocks_raises_out_of_memory():
    blocks = vkpaged.BlockManager(2, 4)
    blocks.add_sequence(1, list(range(8)))
    with pytest.raises(vkpaged.OutOfMemoryError):
        blocks.add_sequence(2, list(range(100, 104)))
    with pytest.raises(vkpaged.InvalidArgumentError, match="7"):
        blocks.append_token(7, 1)
