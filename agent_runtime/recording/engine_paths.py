"""How ViZDoom 1.3.2 mishandles .lmp files, and the ways round it.

Long .lmp paths: recording to one hangs new_episode, replaying one silently plays no demo. Measured: 112
characters work, 113 do not. So the engine only ever sees short paths (temp copies).

A full disk: the engine writes the .lmp out of the WriteGuard's reach and leaves it cut short, saying nothing;
replaying a cut one crashes the engine. The demo's own header (an IFF FORM giving its length) tells it apart.
"""

import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_runtime.errors import UserError

MAX_ENGINE_LMP_PATH = 112
_DEMO_HEADER = struct.Struct(">4sI4s")  # b"FORM", the length of what follows, b"ZDEM"


def fits_engine(path: str | Path) -> bool:
    return len(str(path)) <= MAX_ENGINE_LMP_PATH


def short_temp_dir(for_path: str | Path) -> Path:
    """A fresh temp directory whose episode.lmp path the engine can handle; UserError when TMPDIR is too long too."""
    staging = Path(tempfile.mkdtemp(prefix="lmp-"))
    if not fits_engine(staging / "episode.lmp"):
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"{for_path}: the path is too long for ViZDoom's .lmp handling (at most {MAX_ENGINE_LMP_PATH} "
                        f"characters) and so is the temp dir {staging.parent}; use a shorter directory or set TMPDIR")
    return staging


@contextmanager
def engine_readable_lmp(path: str | Path) -> Iterator[Path]:
    """`path` itself when it is short enough (absolute), else a short temp copy removed afterwards."""
    path = Path(path).resolve()
    if fits_engine(path):
        yield path
        return
    staging = short_temp_dir(path)
    try:
        yield shutil.copyfile(path, staging / "episode.lmp")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def demo_problem(path: str | Path) -> str | None:
    """Why the .lmp at `path` cannot be replayed ("cut short: 300 of 1716 bytes"), or None when it is whole."""
    with open(path, "rb") as f:
        head = f.read(_DEMO_HEADER.size)
        size = f.seek(0, 2)
    if len(head) < _DEMO_HEADER.size:
        return f"cut short: {size} bytes, less than a demo header"
    form, length, kind = _DEMO_HEADER.unpack(head)
    if form != b"FORM" or kind != b"ZDEM":
        return "not a ZDoom demo"
    if size < 8 + length:
        return f"cut short: {size} of {8 + length} bytes"
    return None
