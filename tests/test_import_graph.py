"""The import graph points one way: no module of the project imports one that imports it back, directly or
through others, counting imports inside functions too (a lazy import hides a cycle, it does not remove it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_runtime", "envs", "attention_kernels")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _imported(mod: str, path: Path, mods: dict[str, Path], tree: ast.AST | None = None) -> set[str]:
    """Project modules `mod` imports anywhere in its file, or in `tree` (a package's __init__ counts for
    `from pkg import x` only when x is not a module of its own)."""
    found = set()
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(tree or ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names} & mods.keys()
            found |= subs
            if len(subs) < len(node.names) and base in mods:
                found.add(base)
    found.discard(mod)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imported(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def test_envs_and_kernels_know_nothing_of_the_runtime():
    graph = import_graph()
    for mod, deps in graph.items():
        if mod.startswith(("envs", "attention_kernels")):
            assert not [d for d in deps if d.startswith("agent_runtime")], mod


# Function-level imports of the project's own modules outside the CLI's lazy loading (cli.py, commands/), each with
# why it is not at the top: (module, imported) -> reason.
LAZY_ALLOWED = {
    ("attention_kernels", "attention_kernels.view_attention_triton"):
        "imports triton, an optional GPU dependency, for the triton backend only",
    ("agent_runtime.benchmarks.kv_bench", "attention_kernels.view_attention_triton"): "as above, for bench kv",
    ("agent_runtime.control.action_grammar", "agent_runtime.engine.model_runner"):
        "the engine's runner imports transformers (seconds) at its top; the grammar is imported where no model runs",
    ("agent_runtime.control.action_grammar", "agent_runtime.engine.view"):
        "with engine.model_runner, for the grammar's branch views",
}


def function_level_imports() -> set[tuple[str, str]]:
    """(module, project module) for every import inside a function, outside cli.py and commands/."""
    mods, found = _modules(), set()
    for mod, path in mods.items():
        if mod == "agent_runtime.cli" or mod.startswith("agent_runtime.commands"):
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = ast.Module(body=fn.body, type_ignores=[])
                found |= {(mod, dep) for dep in _imported(mod, path, mods, body)}
    return found


def test_project_modules_are_imported_at_the_top_outside_the_cli():
    lazy = function_level_imports()
    assert lazy - LAZY_ALLOWED.keys() == set(), "import these at the top of the module (or name why not)"
    assert LAZY_ALLOWED.keys() - lazy == set(), "allowed but no longer lazy: drop them from LAZY_ALLOWED"
