"""The agent's sections of blocks (system, user, commentary, thoughts, actions, status, frames) and their caps.

Past its cap the oldest block leaves the section and is released (freed once no view reads it).
"""

from __future__ import annotations

from agent_runtime.kv_block_store import Block, KVBlockStore

SECTION_NAMES = ("system", "user", "commentary", "thoughts", "actions", "status", "frames")


class BlockSections(dict):
    def __init__(self, store: KVBlockStore, caps: dict[str, int]):
        super().__init__({name: [] for name in SECTION_NAMES})
        self.store, self.caps = store, caps

    def add(self, name: str, block: Block) -> None:
        self[name].append(block)
        self.trim(name)

    def trim(self, name: str) -> None:
        blocks = self[name]
        while len(blocks) > self.caps[name]:
            self.store.release(blocks.pop(0))

    def release_all(self) -> None:
        for name in SECTION_NAMES:
            for block in self[name]:
                self.store.release(block)
            self[name] = []
