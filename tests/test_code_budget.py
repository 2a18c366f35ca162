"""#12's bound on agent_runtime/: every function fits on one screen (the engine step included)."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "agent_runtime"
MAX_FUNCTION_LINES = 60


def function_lengths() -> dict[str, int]:
    """'path:name' -> lines from `def` to the function's last line (docstring included, decorators not)."""
    lengths = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[f"{path.relative_to(RUNTIME.parent)}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    return lengths


def test_no_function_in_agent_runtime_is_over_60_lines():
    lengths = function_lengths()
    assert len(lengths) > 500  # the scan sees the runtime's functions
    too_long = {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES}
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"

