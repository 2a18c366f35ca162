"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from agent_runtime.errors import UserError


def check_scenario(name: str) -> None:
    """A scenario name or .cfg that does not resolve is a UserError naming the choices."""
    from envs.scenarios import ScenarioError, resolve_scenario

    try:
        resolve_scenario(name)
    except ScenarioError as e:
        raise UserError(str(e)) from None


def require_expressible(env) -> None:
    """Model policies speak in grammar commands: a scenario with delta buttons is a UserError up front."""
    from agent_runtime.action_grammar import expressible

    bad = [b for b in env.buttons if not expressible(b)]
    if bad:
        raise UserError(
            f"{env.scenario} has button(s) {', '.join(bad)} that the action grammar cannot express "
            "(only binary buttons such as ATTACK, TURN_LEFT, MOVE_FORWARD); pick a scenario without delta buttons"
        )


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
