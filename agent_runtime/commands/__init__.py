"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from agent_runtime.errors import UserError

ADAPTER_HELP = ("LoRA adapter from `agent-runtime train`, merged at load (default: the config's model.adapter, the "
                "shipped one; `none`: the untrained model)")


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


def require_expressible(env) -> None:
    """Model policies speak in grammar commands: a scenario with delta buttons is a UserError up front."""
    from agent_runtime.action_grammar import check_expressible

    check_expressible(env.buttons, env.scenario)


def at_least(args, flag: str, minimum: int) -> None:
    """A value of `flag` below `minimum` is a UserError (an optional flag left unset passes)."""
    value = getattr(args, flag[2:].replace("-", "_"))
    if value is not None and value < minimum:
        raise UserError(f"{flag} must be at least {minimum} (got {value})")


def print_progress(report: dict) -> None:
    """The progress line a session prints every couple of seconds while it plays (SessionLoop.report)."""
    print(f"  .. tic {report['tic']}, kills {report['kills']}, actions {report['actions']}", file=sys.stderr,
          flush=True)


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
