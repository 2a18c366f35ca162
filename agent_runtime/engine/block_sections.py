"""The agent's sections of blocks (system, user, commentary, thoughts, actions, status, frames), their caps, and
each stream's view kept equal to an ordered selection of them.

Past its cap the oldest block leaves the section and is released; a block leaving every view is freed without
recompute.
"""

from __future__ import annotations

from agent_runtime.engine.kv_block_store import Block, KVBlockStore
from agent_runtime.engine.view import View

SECTION_NAMES = ("system", "user", "commentary", "thoughts", "actions", "status", "frames")


class BlockSections(dict):
    def __init__(self, store: KVBlockStore, caps: dict[str, int]):
        super().__init__({name: [] for name in SECTION_NAMES})
        self.store, self.caps = store, caps

    def add(self, name: str, block: Block) -> None:
        """The block joins the section; past its cap, the oldest leave it (released)."""
        blocks = self[name]
        blocks.append(block)
        while len(blocks) > self.caps[name]:
            self.store.release(blocks.pop(0))

    def sync(self, view: View, order: list[tuple[str, int | None]]) -> None:
        """Make `view` read, in `order`, (section name, how many newest blocks; None = all): retains what is new and
        releases what left."""
        want: list[Block] = []
        for name, newest in order:
            want += self[name] if newest is None else self[name][-newest:] if newest > 0 else []
        if [id(b) for b in want] == [id(b) for b in view.blocks]:
            return
        for b in want:
            self.store.retain(b)
        for b in view.blocks:
            self.store.release(b)
        view.blocks = want

    def release_all(self) -> None:
        for name in SECTION_NAMES:
            for block in self[name]:
                self.store.release(block)
            self[name] = []
