"""pyproject.toml against the code: no declared dependency unused, none used undeclared, an extra's packages
imported only where they are needed (a missing extra is one line naming it), and every data file of the shipped
packages is package data (`make test-install` installs the package non-editable and runs it)."""

from __future__ import annotations

import ast
import fnmatch
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agent_runtime import __version__, cli
from agent_runtime.errors import UserError
from agent_runtime.optional import require

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_runtime", "envs", "attention_kernels")
SELF = "doom-agent-runtime"
# Declared and never imported by our code: what uses it, instead.
INDIRECT: dict[str, str] = {}
# Modules that are optional as a whole: they import their extra at the top and are themselves imported only inside
# the functions that need them.
OPTIONAL_MODULES = {"attention_kernels.view_attention_triton": "gpu"}
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Imports(ast.NodeVisitor):
    """(module, nested in a function, extra named by require()) for every import, require("m", "extra") and
    find_spec("m") of a file; relative imports made absolute."""

    def __init__(self, path: Path):
        self.package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
        self.depth, self.found = 0, []

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Import(self, node):
        self.found += [(alias.name, self.depth > 0, None) for alias in node.names]

    def visit_ImportFrom(self, node):
        base = self.package.rsplit(".", node.level - 1)[0] if node.level else ""
        self.found.append((".".join(p for p in (base, node.module) if p), self.depth > 0, None))

    def visit_Call(self, node):
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        args = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        if name in ("require", "find_spec") and args and args[0]:
            self.found.append((args[0], self.depth > 0, args[1] if name == "require" and len(args) > 1 else None))
        self.generic_visit(node)


def imports(folders) -> list[tuple[Path, str, bool, str | None]]:
    out = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            visitor = _Imports(path)
            visitor.visit(ast.parse(path.read_text(), str(path)))
            out += [(path, *found) for found in visitor.found]
    return out


def third_party(found, local=PACKAGES) -> dict[str, list]:
    """Distribution (normalized) -> [(path, module, nested, extra)] of the imports it owns."""
    owners, out = importlib.metadata.packages_distributions(), {}
    for path, module, nested, extra in found:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in local:
            continue
        assert top in owners, f"{path.relative_to(ROOT)} imports {top}, which no installed distribution provides"
        for dist in {norm(d) for d in owners[top]}:
            out.setdefault(dist, []).append((path, module, nested, extra))
    return out


def extras() -> dict[str, list[Requirement]]:
    return {name: [Requirement(r) for r in reqs] for name, reqs in PROJECT["optional-dependencies"].items()}


def core() -> set[str]:
    return {norm(Requirement(r).name) for r in PROJECT["dependencies"]}


def by_extra() -> dict[str, str]:
    """Distribution -> the extra that declares it (every extra but dev, which only composes them)."""
    return {norm(r.name): name for name, reqs in extras().items() if name != "dev" for r in reqs}


def test_every_dependency_is_imported_and_every_import_declared():
    used = third_party(imports(PACKAGES))
    declared = core() | set(by_extra())
    # a module several distributions provide (cv2: opencv-python or -headless) needs one of them declared
    modules = {}
    for dist, sites in used.items():
        for path, module, *_ in sites:
            modules.setdefault((path, module.split(".")[0]), set()).add(dist)
    undeclared = {f"{module} ({path.relative_to(ROOT)})" for (path, module), dists in modules.items()
                  if not dists & declared}
    assert not undeclared, f"imported, not declared in pyproject.toml: {sorted(undeclared)}"
    unused = declared - set(used) - set(INDIRECT)
    assert not unused, f"declared in pyproject.toml, imported nowhere: {sorted(unused)}"
    assert set(INDIRECT) <= declared and not set(INDIRECT) & set(used), "INDIRECT lists what is declared, unimported"


def test_dev_is_every_extra_and_the_test_tools_without_repeats():
    dev = extras()["dev"]
    own = [r for r in dev if norm(r.name) == SELF]
    assert len(own) == 1 and own[0].extras == set(extras()) - {"dev"}, "[dev] installs every other extra"
    repeated = {r.name for r in dev if norm(r.name) != SELF and norm(r.name) in core() | set(by_extra())}
    assert not repeated, f"[dev] repeats what the package or its extras declare: {sorted(repeated)}"
    helpers = (p.stem for p in (ROOT / "tests").glob("*.py"))
    local = (*PACKAGES, "tests", "docs", "tomli", *helpers)  # docs: the generator scripts; tomli: 3.10's tomllib
    tests_use = third_party(imports(["tests"]), local)
    installed = core() | set(by_extra()) | {norm(r.name) for r in dev} | {"packaging"}  # packaging: pytest's own
    assert set(tests_use) <= installed, f"tests import what `make` does not install: {set(tests_use) - installed}"


def test_an_extra_is_imported_only_where_it_is_needed():
    extra_of = {dist: extra for dist, extra in by_extra().items() if dist not in core()}
    found = imports(PACKAGES)
    for dist, sites in third_party(found).items():
        for path, module, nested, named in sites:
            where = f"{path.relative_to(ROOT)}: {module}"
            if dist in extra_of and OPTIONAL_MODULES.get(module_name(path)) != extra_of[dist]:
                assert nested, f"{where} is in the [{extra_of[dist]}] extra: import it inside the function using it"
            assert named in (None, extra_of.get(dist)), f"{where}: require() names [{named}], pyproject [{extra_of.get(dist)}]"
    for path, module, nested, _ in found:
        assert nested or module not in OPTIONAL_MODULES, f"{path.relative_to(ROOT)} imports {module} at its top"


def test_a_missing_extra_is_one_line_naming_it(tmp_path, monkeypatch):
    absent, broken = "doom_agent_runtime_absent", "needs_absent_dep"  # names, not literals: the scan above skips them
    with pytest.raises(UserError) as e:
        require(absent, "voice")
    assert "[voice]" in str(e.value) and "pip install 'doom-agent-runtime[voice]'" in str(e.value)
    assert "\n" not in str(e.value)
    (tmp_path / f"{broken}.py").write_text(f"import {absent}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):  # installed, but broken: its own error, not "install the extra"
        require(broken, "voice")


def test_every_data_file_of_the_packages_is_package_data():
    from agent_runtime.config import CONFIG_DIR
    from agent_runtime.model.adapters import TRAINED

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    try:
        files = subprocess.run(["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    data = [f for f in files if not f.endswith(".py")]
    assert data, "git ls-files listed no data files"
    for f in data:
        package, _, rest = f.partition("/")
        assert any(fnmatch.fnmatch(rest, p) for p in patterns.get(package, [])), f"{f} is not package data"
    assert CONFIG_DIR.parent == TRAINED.parent == ROOT / "agent_runtime"  # both read from inside the package
    assert (CONFIG_DIR / "default.yaml").is_file() and (ROOT / "configs").resolve() == CONFIG_DIR


def test_one_version_and_the_version_flag(capsys):
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    setting = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]["version"]
    assert setting == {"attr": "agent_runtime.__version__"}
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"agent-runtime {__version__}\n"
