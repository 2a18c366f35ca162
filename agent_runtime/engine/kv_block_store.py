"""The KV cache as shared memory: a fixed pool of pages holding blocks of tokens at block-local positions.

Keys are stored once at local positions, so any view can read a block at any offset (the query is rotated
instead). Blocks are reference counted and freed with their last holder; the pool never grows (CapacityError).
"""

import itertools
from collections import deque
from dataclasses import dataclass, field

import torch

from agent_runtime.errors import CapacityError


@dataclass(eq=False)
class Block:
    """A run of tokens whose KV lives in the store's pages, at local positions 0..length-1."""

    id: int
    label: str
    pages: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    refcount: int = 1
    sealed: bool = False
    freed: bool = False
    isolated: bool = False  # every write to it read no other block (a frame, status, user or system text)

    @property
    def length(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        return f"Block({self.id}, {self.label!r}, len={self.length}, refs={self.refcount})"


class KVBlockStore:
    """Pages of KV for every layer: k/v tensors of shape [layers, pages*page_size, kv_heads, head_dim]."""

    def __init__(self, *, num_layers: int, num_kv_heads: int, head_dim: int, capacity_tokens: int, page_size: int = 16,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        if capacity_tokens < page_size:
            raise ValueError(f"capacity_tokens ({capacity_tokens}) must be at least page_size ({page_size})")
        self.page_size = page_size
        self.num_pages = capacity_tokens // page_size
        self.capacity_tokens = self.num_pages * page_size
        shape = (num_layers, self.capacity_tokens, num_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self._free_pages: deque[int] = deque(range(self.num_pages))
        self._ids = itertools.count()
        self.blocks: dict[int, Block] = {}

    @classmethod
    def for_model(cls, config, *, capacity_tokens: int, page_size: int = 16, dtype=None, device="cpu"):
        """A store sized for a transformers model config (its layers, KV heads and head size)."""
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(num_layers=config.num_hidden_layers, num_kv_heads=config.num_key_value_heads, head_dim=head_dim,
                   capacity_tokens=capacity_tokens, page_size=page_size, dtype=dtype or torch.float32, device=device)

    def create(self, label: str = "") -> Block:
        """A new empty block, held once by the caller."""
        block = Block(id=next(self._ids), label=label)
        self.blocks[block.id] = block
        return block

    def retain(self, block: Block) -> Block:
        self._check_live(block)
        block.refcount += 1
        return block

    def release(self, block: Block) -> None:
        """Drop one hold; the last one frees the pages. Nothing is recomputed anywhere."""
        self._check_live(block)
        block.refcount -= 1
        if block.refcount == 0:
            self._free_pages.extend(block.pages)
            block.pages = []
            block.freed = True
            del self.blocks[block.id]

    def _check_live(self, block: Block) -> None:
        if block.freed:
            raise RuntimeError(f"{block!r} was already freed")

    def reserve_slots(self, block: Block, n: int) -> torch.Tensor:
        """Cache slots for the block's next n tokens, allocating pages as needed (not yet committed)."""
        self._check_live(block)
        if block.sealed:
            raise RuntimeError(f"{block!r} is sealed; append to a new block")
        start, end = block.length, block.length + n
        pages_needed = -(-end // self.page_size) - len(block.pages)
        if pages_needed > len(self._free_pages):
            raise CapacityError(f"KV block store is full: need {pages_needed} more pages of {self.page_size} tokens, "
                                f"{len(self._free_pages)} free of {self.num_pages} (capacity {self.capacity_tokens} "
                                "tokens); raise kv.capacity_tokens or keep fewer frames/thoughts in the views")
        for _ in range(pages_needed):
            block.pages.append(self._free_pages.popleft())
        local = torch.arange(start, end)
        pages = torch.tensor(block.pages, dtype=torch.long)
        return pages[local // self.page_size] * self.page_size + local % self.page_size

    def commit(self, block: Block, token_ids: list[int]) -> None:
        """Record tokens whose KV the forward pass has just written into the reserved slots."""
        block.token_ids.extend(int(t) for t in token_ids)

    def chunks(self, block: Block, length: int | None = None) -> list[tuple[int, int, int]]:
        """(first slot, number of tokens, local position of the first) for runs of contiguous slots."""
        n = block.length if length is None else length
        out: list[tuple[int, int, int]] = []
        for i, page in enumerate(block.pages):
            local = i * self.page_size
            if local >= n:
                break
            size = min(self.page_size, n - local)
            slot = page * self.page_size
            if out and out[-1][0] + out[-1][1] == slot and out[-1][1] % self.page_size == 0:
                first_slot, count, first_local = out[-1]
                out[-1] = (first_slot, count + size, first_local)
            else:
                out.append((slot, size, local))
        return out

    @property
    def used_pages(self) -> int:
        return self.num_pages - len(self._free_pages)
