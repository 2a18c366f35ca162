"""Many episodes beyond one process: `--workers N` / `--ray-address ADDR` fan episodes out to Ray actors.

Ray is imported only when a command asks for it (wanted(args)), so single-process start-up does not pay for it.
"""

import argparse

from agent_runtime.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--workers and --ray-address, the same in every fanned-out command."""
    p.add_argument("--workers", type=int, default=1,
                   help="Ray workers that play episodes side by side, each loading the model once (default 1: "
                        "in this process, without Ray)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="an existing Ray cluster (host:port, ray://host:port or auto); default with --workers > 1: "
                        "a local Ray started for the run. A cluster of several machines needs --out on a shared "
                        "file system")


def check(args: argparse.Namespace) -> None:
    """Bad values are one UserError line, before anything starts."""
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1 (got {args.workers})")
    if args.ray_address is not None and not args.ray_address.strip():
        raise UserError("--ray-address must not be empty (host:port, ray://host:port or auto)")


def wanted(args) -> bool:
    """True when the command should run on Ray rather than in this process."""
    return getattr(args, "workers", 1) > 1 or bool(getattr(args, "ray_address", None))
