"""Which cache chunks each view sees, and where each query row sits in its view.

A view is an ordered list of chunks (runs of contiguous cache slots). Keys are stored once,
rotated at block-local positions; ``chunk_offset`` (view position minus rotation position of
the chunk's first key) and ``q_offset`` let attention re-rotate them to view positions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


def check_attention_args(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, layout: "ViewLayout"):
    """ValueError unless q [T, Hq, D] fits the caches [N, Hkv, D] and the layout; returns (T, Hq, D, Hkv)."""
    t, hq, d = q.shape
    n, hkv, dk = k_cache.shape
    if dk != d or v_cache.shape != k_cache.shape:
        raise ValueError(f"shape mismatch: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of kv heads ({hkv})")
    if t != layout.num_rows:
        raise ValueError(f"q has {t} rows, layout has {layout.num_rows}")
    return t, hq, d, hkv


@dataclass
class ViewLayout:
    """CSR description of views (all int64 tensors on one device)."""

    q_view: torch.Tensor  # [T] view index of each query row
    q_pos: torch.Tensor  # [T] position of the row in its view
    q_offset: torch.Tensor  # [T] q_pos minus the position at which q was rotated
    view_chunk_ptr: torch.Tensor  # [V+1] chunks of view v are ptr[v]:ptr[v+1]
    chunk_slot: torch.Tensor  # [C] first cache slot
    chunk_len: torch.Tensor  # [C] number of keys
    chunk_pos: torch.Tensor  # [C] view position of the first key
    chunk_offset: torch.Tensor  # [C] chunk_pos minus rotation position of the first key

    def __post_init__(self):
        self.validate()

    @property
    def num_views(self) -> int:
        return self.view_chunk_ptr.numel() - 1

    @property
    def num_rows(self) -> int:
        return self.q_view.numel()

    @property
    def num_chunks(self) -> int:
        return self.chunk_slot.numel()

    @property
    def device(self) -> torch.device:
        return self.q_view.device

    def to(self, device) -> "ViewLayout":
        return ViewLayout(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def select(self, views: list[int]) -> tuple["ViewLayout", torch.Tensor]:
        """The layout of some views alone (renumbered in the given order) and the indices of their query rows."""
        dev = self.device
        ptr = self.view_chunk_ptr.tolist()
        renumber = torch.full((self.num_views,), -1, dtype=torch.int64, device=dev)
        renumber[torch.tensor(views, dtype=torch.int64, device=dev)] = torch.arange(len(views), device=dev)
        new_view = renumber[self.q_view]
        rows = torch.nonzero(new_view >= 0).flatten()
        chunk_list = [list(range(ptr[v], ptr[v + 1])) for v in views]
        chunks = torch.tensor([c for cs in chunk_list for c in cs], dtype=torch.int64, device=dev)
        new_ptr = torch.tensor([0] + [len(cs) for cs in chunk_list], dtype=torch.int64, device=dev).cumsum(0)
        sub = ViewLayout(
            q_view=new_view[rows],
            q_pos=self.q_pos[rows],
            q_offset=self.q_offset[rows],
            view_chunk_ptr=new_ptr,
            chunk_slot=self.chunk_slot[chunks],
            chunk_len=self.chunk_len[chunks],
            chunk_pos=self.chunk_pos[chunks],
            chunk_offset=self.chunk_offset[chunks],
        )
        return sub, rows

    def validate(self) -> None:
        """Raise ValueError on malformed layouts (cheap; syncs once on GPU)."""
        devices = set()
        for f in fields(self):
            t = getattr(self, f.name)
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"ViewLayout.{f.name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype != torch.int64:
                raise ValueError(f"ViewLayout.{f.name} must be int64, got {t.dtype}")
            if t.dim() != 1:
                raise ValueError(f"ViewLayout.{f.name} must be 1-D, got shape {tuple(t.shape)}")
            devices.add(t.device)
        if len(devices) > 1:
            raise ValueError(f"ViewLayout tensors are on several devices: {sorted(map(str, devices))}")
        t = self.q_view.numel()
        for name in ("q_pos", "q_offset"):
            if getattr(self, name).numel() != t:
                raise ValueError(f"ViewLayout.{name} has {getattr(self, name).numel()} rows, q_view has {t}")
        c = self.chunk_slot.numel()
        for name in ("chunk_len", "chunk_pos", "chunk_offset"):
            if getattr(self, name).numel() != c:
                raise ValueError(f"ViewLayout.{name} has {getattr(self, name).numel()} chunks, chunk_slot has {c}")
        ptr = self.view_chunk_ptr
        if ptr.numel() < 1:
            raise ValueError("ViewLayout.view_chunk_ptr needs at least one entry (V+1 for V views)")
        v = ptr.numel() - 1
        if int(ptr[0]) != 0 or int(ptr[-1]) != c:
            raise ValueError(f"ViewLayout.view_chunk_ptr must start at 0 and end at {c} (chunks), got {ptr.tolist()}")
        if v > 0 and bool((ptr[1:] < ptr[:-1]).any()):
            raise ValueError(f"ViewLayout.view_chunk_ptr must be non-decreasing, got {ptr.tolist()}")
        if c and bool((self.chunk_len < 0).any()):
            raise ValueError("ViewLayout.chunk_len has negative lengths")
        if c and bool((self.chunk_slot < 0).any()):
            raise ValueError("ViewLayout.chunk_slot has negative slots")
        if t and bool(((self.q_view < 0) | (self.q_view >= v)).any()):
            raise ValueError(f"ViewLayout.q_view must lie in 0..{v - 1}")

    @classmethod
    def build(
        cls,
        views: list[list[tuple[int, int, int, int]]],
        queries: list[tuple[int, int, int]],
        device=None,
    ) -> "ViewLayout":
        """From python lists: views[v] = [(slot, len, pos, offset), ...]; queries[t] = (view, pos, offset)."""
        chunks = []
        ptr = [0]
        for v, chunk_list in enumerate(views):
            for ch in chunk_list:
                if len(ch) != 4:
                    raise ValueError(f"view {v}: a chunk is (slot, len, pos, offset), got {ch!r}")
                chunks.append(tuple(int(x) for x in ch))
            ptr.append(len(chunks))
        for t, row in enumerate(queries):
            if len(row) != 3:
                raise ValueError(f"query {t}: a query is (view, pos, offset), got {row!r}")

        def col(rows, i):
            return torch.tensor([r[i] for r in rows], dtype=torch.int64, device=device)

        return cls(
            q_view=col(queries, 0),
            q_pos=col(queries, 1),
            q_offset=col(queries, 2),
            view_chunk_ptr=torch.tensor(ptr, dtype=torch.int64, device=device),
            chunk_slot=col(chunks, 0),
            chunk_len=col(chunks, 1),
            chunk_pos=col(chunks, 2),
            chunk_offset=col(chunks, 3),
        )
