"""A stream's view: the ordered blocks it reads, ending with the block it writes to.

Dropping a block releases it; the blocks after it move to a smaller offset with no recompute, because keys are
stored at block-local positions and the query is rotated per block.
"""

from agent_runtime.engine.kv_block_store import Block, KVBlockStore


class View:
    def __init__(self, store: KVBlockStore, blocks: list[Block] = (), own: Block | None = None, name: str = "",
                 own_label: str | None = None):
        """own: the block it writes to (retained); own_label: start a fresh own block instead (start_own)."""
        self.store, self.name = store, name
        self.own: Block | None = store.retain(own) if own is not None else None
        self.blocks: list[Block] = [store.retain(b) for b in blocks]
        if own_label is not None:
            self.start_own(own_label)

    def drop(self, block: Block) -> None:
        """Stop reading a block; it is freed once no view or owner holds it."""
        self.blocks.remove(block)
        self.store.release(block)

    def set_own(self, block: Block) -> None:
        """The block this view's stream writes to; it comes last in the view."""
        self.store.retain(block)  # before releasing the old one: set_own(view.own) must not free it
        if self.own is not None:
            self.store.release(self.own)
        self.own = block

    def start_own(self, label: str = "") -> Block:
        """Begin a fresh own block (the view is its only holder); the previous own block is released."""
        self.set_own(self.store.create(label))
        self.store.release(self.own)  # the creation hold
        return self.own

    def roll_own(self, label: str) -> Block:
        """Hand the own block, with this view's hold, to the caller (a finished paragraph); start a fresh one."""
        block, self.own = self.own, None
        self.start_own(label)
        return block

    def ordered(self) -> list[Block]:
        return self.blocks + ([self.own] if self.own is not None else [])

    @property
    def length(self) -> int:
        return sum(b.length for b in self.ordered())

    def token_ids(self) -> list[int]:
        """The concatenated tokens the view stands for (what a plain model would read)."""
        return [t for b in self.ordered() for t in b.token_ids]

    def isolated_spans(self) -> list[list[int]]:
        """[start, end) of each isolated block in token_ids(): tokens that attended only each other when written, so a
        plain forward reproduces this view's keys and values only with that block-diagonal mask (training)."""
        spans, start = [], 0
        for b in self.ordered():
            if b.isolated:
                spans.append([start, start + b.length])
            start += b.length
        return spans

    def block_layout(self) -> list[list]:
        """[label, length] of each block in token_ids() order: which tokens came from which block (training derives
        other agents' views of the same decision from it)."""
        return [[b.label, b.length] for b in self.ordered()]

    def close(self) -> None:
        for b in self.ordered():
            self.store.release(b)
        self.blocks, self.own = [], None

    def __repr__(self) -> str:
        return f"View({self.name!r}, {[b.label or b.id for b in self.ordered()]}, len={self.length})"
