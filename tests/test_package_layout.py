"""The shipped top-level packages: none shadows another installed distribution's import name (our old `kernels/`
shadowed Hugging Face's `kernels`, which transformers 5.25 imports), and dependencies point one way."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shipped_packages() -> list[str]:
    """[tool.setuptools.packages.find] include, read without tomllib (Python 3.10 has none)."""
    line = re.search(r"^include\s*=\s*\[(.*)\]", (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    return [pattern.strip().strip('"').rstrip("*") for pattern in line.split(",")]


def imported_top_levels(package: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_no_shipped_package_shadows_an_installed_distribution():
    owners = importlib.metadata.packages_distributions()
    packages = shipped_packages()
    assert set(packages) == {"agent_runtime", "envs", "attention_kernels"}
    for package in packages:
        others = set(owners.get(package, [])) - {"doom-agent-runtime"}
        assert not others, f"top-level package {package!r} is also the import name of {sorted(others)}"


def test_envs_and_kernels_import_nothing_of_the_runtime():
    for package in ("envs", "attention_kernels"):
        imported = imported_top_levels(package)
        assert "agent_runtime" not in imported, f"{package}/ imports agent_runtime"
    assert "envs" not in imported_top_levels("attention_kernels")
    assert "transformers" in imported_top_levels("agent_runtime")  # the scan sees real imports
