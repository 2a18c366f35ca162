"""Keeps each stream's view equal to an ordered selection of the agent's block sections.

sync() retains what is new and releases what left, so a block leaving every view is freed without recompute.
"""

from __future__ import annotations

from agent_runtime.kv_block_store import Block
from agent_runtime.view import View


class ViewSections:
    def __init__(self, view: View, order: list[tuple[str, int | None]]):
        """order: (section name, how many newest blocks to read; None = all)."""
        self.view = view
        self.order = order

    def desired(self, sections: dict[str, list[Block]]) -> list[Block]:
        out: list[Block] = []
        for name, newest in self.order:
            blocks = sections.get(name, [])
            out.extend(blocks if newest is None else blocks[-newest:] if newest > 0 else [])
        return out

    def sync(self, sections: dict[str, list[Block]]) -> None:
        want = self.desired(sections)
        have = self.view.blocks
        if [id(b) for b in want] == [id(b) for b in have]:
            return
        store = self.view.store
        for b in want:
            store.retain(b)
        for b in have:
            store.release(b)
        self.view.blocks = list(want)
