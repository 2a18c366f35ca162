"""Many episodes beyond one process: `--workers N` / `--ray-address ADDR` fan episodes out to Ray actors.

Each worker is a Ray actor that loads the model once, holds one ViZDoom engine at a time and plays the
episodes it is given; the driver streams results back as episodes end, retries an episode whose worker
died once on another worker, and stops every worker cleanly on SIGINT/SIGTERM. Ray is imported only when a
command asks for it (wanted(args)), so single-process start-up does not pay for it.
"""

from __future__ import annotations


def wanted(args) -> bool:
    """True when the command should run on Ray rather than in this process."""
    return getattr(args, "workers", 1) > 1 or bool(getattr(args, "ray_address", None))
