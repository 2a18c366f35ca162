"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent_runtime.errors import UserError

# Options that mean the same in every command that has them: add_options(p, flag, ...) adds them.
OPTIONS = {
    "--model": dict(help="model: a safetensors directory, a .gguf file, tiny:llama or a Hugging Face id "
                         "(OWNER/NAME) already in the local Hugging Face cache, never downloaded (default: the "
                         "config's, else the embedded SmolLM2-135M-Instruct)"),
    "--adapter": dict(help="LoRA adapter from `agent-runtime train`, merged at load (default: the config's "
                           "model.adapter, the shipped one; `none`: the untrained model)"),
    "--no-record": dict(action="store_true", help="write no recording"),
    "--scenario": dict(default="defend_the_center", help="scenario name or .cfg (default defend_the_center)"),
    "--seed": dict(type=int, default=0, help="episode i plays seed SEED + i (default 0)"),
    "--config": dict(help="YAML run config (default configs/default.yaml)"),
    "--threads": dict(type=int, help="torch threads (default: the cores actually free)"),
    "--max-tics": dict(type=int, help="stop each episode after this many tics"),
    "--fixed-cost": dict(action="store_true", help="charge each engine step a fixed cost per token instead of its "
                                                   "measured compute time (deterministic)"),
    "--device": dict(default="cpu", choices=("cpu", "cuda"), help="where the model runs (default cpu)"),
}


def add_options(p, *flags: str) -> None:
    """The shared OPTIONS named by `flags`, so a flag's default and help cannot drift between commands."""
    for flag in flags:
        p.add_argument(flag, **OPTIONS[flag])


def add_on_disk_full(p, run: str) -> None:
    """--on-disk-full for a command whose `run` ("run", "session") records."""
    p.add_argument("--on-disk-full", choices=("continue", "stop"), default="continue",
                   help=f"when a recording cannot be written mid-{run} (a full or unwritable disk; one line says so "
                        "and what was written stays readable): continue = play on without recording (default); "
                        f"stop = end the {run} cleanly after the current step, exit code 1")


def check_scenario(name: str) -> None:
    """A scenario name or .cfg that does not resolve is a UserError naming the choices."""
    from envs.scenarios import ScenarioError, resolve_scenario

    try:
        resolve_scenario(name)
    except ScenarioError as e:
        raise UserError(str(e)) from None


def require_cuda(device: str) -> None:
    """--device cuda on a machine without one is a UserError before the model loads."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: no CUDA device is available here; use --device cpu")


def at_least(args, minimum: int, *flags: str) -> None:
    """A value of one of `flags` below `minimum` is a UserError (an optional flag left unset passes)."""
    for flag in flags:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value < minimum:
            raise UserError(f"{flag} must be at least {minimum} (got {value})")


def writable_dir(path_text: str, what: str) -> Path:
    """Create DIR and prove it is writable before any work runs, so no result is lost at the end."""
    path = Path(path_text).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path, prefix=".probe-").close()  # deleted on close
    except OSError as e:
        raise UserError(f"cannot write to {what} {path}: {e.strerror or e}") from None
    return path
