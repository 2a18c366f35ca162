"""ViZDoom 1.3.2 mishandles long .lmp paths: recording to one hangs new_episode, replaying one silently plays
no demo. Measured: 112 characters work, 113 do not. So the engine only ever sees short paths (temp copies).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_runtime.errors import UserError

MAX_ENGINE_LMP_PATH = 112


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
        copy = staging / "episode.lmp"
        shutil.copyfile(path, copy)
        yield copy
    finally:
        shutil.rmtree(staging, ignore_errors=True)
