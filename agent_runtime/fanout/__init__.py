"""Many episodes beyond one process: `--workers N` / `--ray-address ADDR` fan episodes out to Ray actors.

Ray is imported only when a command asks for it (wanted(args)), so single-process start-up does not pay for it.
"""

from __future__ import annotations


def wanted(args) -> bool:
    """True when the command should run on Ray rather than in this process."""
    return getattr(args, "workers", 1) > 1 or bool(getattr(args, "ray_address", None))
