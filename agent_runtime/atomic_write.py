"""The one way files are replaced in place: written beside the target, fsynced, then renamed onto it, so a crash or a
full disk leaves the old file or the new one, never half of one (nor a temp file left behind)."""

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temp path beside `path` for the block to write (a file, or a directory of files); fsynced and renamed onto
    `path` when the block ends, removed when it raises (a directory replaces only a missing or empty one)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        for written in sorted(tmp.iterdir()) if tmp.is_dir() else [tmp]:
            with open(written, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:  # nothing there once renamed
        shutil.rmtree(tmp, ignore_errors=True)  # a directory the block left
        tmp.unlink(missing_ok=True)  # a file


def write_json_atomic(path: str | Path, data: Any, *, sort_keys: bool = False) -> None:
    """`data` as indented JSON (what json cannot encode as its str()), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys, default=str) + "\n")
