"""The command-line options every fanned-out command shares: --workers and --ray-address."""

from __future__ import annotations

import argparse

from agent_runtime.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
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
