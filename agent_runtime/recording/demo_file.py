"""The episode.lmp that ViZDoom writes itself: a ZDoom demo, an IFF FORM whose header gives its length.

The engine writes it out of the WriteGuard's reach and leaves it cut short on a full disk, saying nothing;
replaying a cut one crashes the engine. Its own header tells a cut demo from a whole one.
"""

from __future__ import annotations

import struct
from pathlib import Path

_HEADER = struct.Struct(">4sI4s")  # b"FORM", the length of what follows, b"ZDEM"


def demo_problem(path: str | Path) -> str | None:
    """Why the .lmp at `path` cannot be replayed ("cut short: 300 of 1716 bytes"), or None when it is whole."""
    with open(path, "rb") as f:
        head = f.read(_HEADER.size)
        size = f.seek(0, 2)
    if len(head) < _HEADER.size:
        return f"cut short: {size} bytes, less than a demo header"
    form, length, kind = _HEADER.unpack(head)
    if form != b"FORM" or kind != b"ZDEM":
        return "not a ZDoom demo"
    if size < 8 + length:
        return f"cut short: {size} of {8 + length} bytes"
    return None
