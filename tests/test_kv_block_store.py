"""Block store accounting: fixed capacity, sharing by refcount, freeing, contiguous chunks."""

import pytest
import torch

from agent_runtime.errors import CapacityError
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.view import View


def make_store(capacity=64, page=4):
    return KVBlockStore(num_layers=2, num_kv_heads=1, head_dim=4, capacity_tokens=capacity, page_size=page)


def fill(store, block, n):
    slots = store.reserve_slots(block, n)
    store.commit(block, list(range(n)))
    return slots


def test_slots_follow_pages_and_chunks_merge_contiguous_pages():
    store = make_store()
    b = store.create("b")
    slots = fill(store, b, 10)
    assert slots.tolist() == list(range(10))  # fresh pool hands out consecutive pages
    assert store.chunks(b) == [(0, 10, 0)]
    other = store.create("o")
    fill(store, other, 3)  # takes page 3
    more = fill(store, b, 4)  # b grows into page 4 after other's page
    assert more.tolist() == [10, 11, 16, 17]
    assert store.chunks(b) == [(0, 12, 0), (16, 2, 12)]


def test_capacity_is_a_clear_error_not_growth():
    store = make_store(capacity=16, page=4)
    b = store.create()
    fill(store, b, 16)
    with pytest.raises(CapacityError, match="KV block store is full"):
        store.reserve_slots(store.create(), 1)
    assert store.k.shape[1] == 16


def test_shared_block_is_freed_when_the_last_view_drops_it():
    store = make_store()
    frame = store.create("frame")
    fill(store, frame, 5)
    views = [View(store, [frame], name=str(i)) for i in range(3)]
    store.release(frame)  # creator lets go; views still hold it
    assert frame.refcount == 3 and store.used_pages == 2
    views[0].drop(frame)
    views[1].drop(frame)
    assert not frame.freed and store.used_pages == 2
    views[2].drop(frame)
    assert frame.freed and store.used_pages == 0
    with pytest.raises(RuntimeError, match="already freed"):
        store.retain(frame)


def test_view_offsets_shift_after_drop_without_touching_kv():
    store = make_store()
    blocks = [store.create(f"b{i}") for i in range(3)]
    for i, b in enumerate(blocks):
        fill(store, b, 3 + i)
    store.k[:, : store.used_pages * 4] = torch.randn_like(store.k[:, : store.used_pages * 4])
    before = store.k.clone()
    view = View(store, blocks, own=store.create("own"))
    assert view.length == 3 + 4 + 5
    view.drop(blocks[1])
    assert view.length == 3 + 5
    assert view.token_ids() == list(range(3)) + list(range(5))
    assert torch.equal(store.k, before)
