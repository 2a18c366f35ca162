"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent_runtime.errors import UserError


def writable_dir(path_text: str, what: str) -> Path:
    """Create DIR and prove it is writable before any work runs, so no result is lost at the end."""
    path = Path(path_text).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as e:
        raise UserError(f"cannot write to {what} {path}: {e.strerror or e}") from None
    return path
