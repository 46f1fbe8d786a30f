# SPDX-License-Identifier: Apache-2.0
"""The BlockManager from Python: sharing by fork and by the prefix cache, copy-on-write,
swapping, preemption, and the arrays it hands the GPU calls."""
import numpy as np

import vkpaged

B = 4


def test_a_fork_shares_every_block_and_the_first_append_copies_the_last_on_write():
    blocks = vkpaged.BlockManager(16, B, enable_prefix_caching=False)
    assert blocks.add_sequence(1, [1, 2, 3, 4, 5, 6]) == 0
    parent = blocks.block_table(1)
    blocks.fork(1, 2)
    np.testing.assert_array_equal(blocks.block_table(2), parent)
    assert all(blocks.ref_count(int(b)) == 2 for b in parent)
    assert blocks.usage().in_use == 2

    appended = blocks.append_token(2, 7)  # the last block is shared and partly filled
    assert appended.copy is not None and appended.copy.src == parent[-1]
    child = blocks.block_table(2)
    assert child[0] == parent[0] and child[-1] == appended.copy.dst != parent[-1]
    assert appended.slot == appended.copy.dst * B + 2  # position 6: offset 2 of the copied block
    assert blocks.ref_count(int(parent[0])) == 2 and blocks.ref_count(int(parent[-1])) == 1
    again = blocks.append_token(2, 8)  # the copy is the child's own now
    assert again.copy is None and again.slot == appended.slot + 1
    assert blocks.context_len(2) == 8 and blocks.context_len(1) == 6

    blocks.free_sequence(2)
    assert not blocks.contains(2) and blocks.ref_count(int(parent[0])) == 1
    u = blocks.usage()
    assert (u.in_use, u.in_use + u.free + u.cached) == (2, u.num_blocks)


def test_the_prefix_cache_shares_full_blocks_of_a_repeated_prompt():
    blocks = vkpaged.BlockManager(16, B)
    prompt = list(range(10, 20))  # two full blocks and two tokens
    assert blocks.add_sequence(1, prompt) == 0
    assert blocks.add_sequence(2, np.array(prompt, np.int32)) == 8  # the two full blocks are cached
    first, second = blocks.block_table(1), blocks.block_table(2)
    np.testing.assert_array_equal(first[:2], second[:2])
    assert first[2] != second[2]
    stats = blocks.prefix_cache_stats()
    assert stats.hit_blocks == 2 and stats.hit_tokens == 8
    blocks.free_sequence(1)
    blocks.free_sequence(2)
    assert blocks.num_cached_blocks == 2  # kept for reuse, evictable
    assert blocks.add_sequence(3, prompt[:8] + [99]) == 8


def test_swapping_out_and_in_hands_out_block_pairs():
    blocks = vkpaged.BlockManager(8, B, num_host_blocks=4, enable_prefix_caching=False)
    blocks.add_sequence(1, list(range(7)))
    device = blocks.block_table(1)
    assert blocks.can_swap_out(1)
    out_pairs = blocks.swap_out(1)
    assert [(p.src, p.dst) for p in out_pairs] == list(zip(device, blocks.host_block_table(1)))
    assert blocks.is_swapped(1) and not blocks.can_append(1)
    assert blocks.usage().host_in_use == 2 and blocks.usage().in_use == 0
    assert blocks.can_swap_in([1]) == "ok"
    in_pairs = blocks.swap_in([1])
    assert [p.src for p in in_pairs] == [p.dst for p in out_pairs]
    np.testing.assert_array_equal(blocks.block_table(1), [p.dst for p in in_pairs])
    src, dst = in_pairs[0]  # a BlockCopy unpacks as a pair
    assert (src, dst) == (in_pairs[0].src, in_pairs[0].dst) and in_pairs[0] == vkpaged.BlockCopy(src, dst)
    assert blocks.preempt(1) == 7 and not blocks.contains(1)


def test_admission_and_the_batch_arrays():
    blocks = vkpaged.BlockManager(4, B, watermark=0.0)
    assert blocks.can_allocate(list(range(17))) == "never"
    assert blocks.can_allocate(list(range(8))) == "ok"
    blocks.add_sequence(5, list(range(8)))
    blocks.add_sequence(6, list(range(100, 103)))
    assert blocks.can_allocate(list(range(200, 208))) == "later"
    tables, lens = blocks.build_batch([5, 6], 3)
    assert tables.dtype == np.int32 and tables.shape == (2, 3)
    np.testing.assert_array_equal(lens, [8, 3])
    np.testing.assert_array_equal(tables[0, :2], blocks.block_table(5))
    assert tables[1, 1] == 0 and tables[1, 2] == 0  # padded with block 0
    slots = blocks.slot_mapping(6, 0, 3)
    assert slots.dtype == np.int64
    np.testing.assert_array_equal(slots, blocks.block_table(6)[0] * B + np.arange(3))
