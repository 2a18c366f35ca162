"""`train --out` replaces only a previous adapter: a data set, the current directory or a folder of other files is
refused in one line (exit 2) before the model loads, and nothing in it is touched."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


def _tree_hash(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        h.update(str(p.relative_to(d)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("train_out") / "data"
    proc = _cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "2",
                "--max-tics", "60", "--out", str(d))
    assert proc.returncode == 0, proc.stderr
    return d


def _refused(proc: subprocess.CompletedProcess, words: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr


def test_out_equal_to_or_inside_the_data_set_leaves_it_untouched(data):
    before = _tree_hash(data)
    _refused(_cli("train", "--data", str(data), "--out", str(data), "--steps", "1", "--threads", "1"),
             "--data set")
    _refused(_cli("train", "--data", str(data), "--out", str(data / "adapter"), "--steps", "1", "--threads", "1"),
             "--data set")
    _refused(_cli("train", "--data", str(data), "--out", str(data.parent), "--steps", "1", "--threads", "1"),
             "--data set")
    assert _tree_hash(data) == before and data.is_dir()


def test_out_dot_and_a_folder_of_other_files_are_refused(data, tmp_path):
    _refused(_cli("train", "--data", str(data), "--out", ".", "--steps", "1", "--threads", "1", cwd=tmp_path),
             "not the current or the root directory")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    _refused(_cli("train", "--data", str(data), "--out", str(mine), "--steps", "1", "--threads", "1"),
             "is not an adapter")
    assert (mine / "notes.txt").read_text() == "keep me"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _refused(_cli("train", "--data", str(data), "--out", str(a_file), "--steps", "1", "--threads", "1"),
             "not a directory")
    assert a_file.read_text() == "x"


def test_a_previous_adapter_is_replaced_whole(data, tmp_path):
    adapter = tmp_path / "adapter"
    for seed in ("0", "1"):
        proc = _cli("train", "--data", str(data), "--out", str(adapter), "--steps", "2", "--threads", "1",
                    "--seed", seed)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((adapter / "manifest.json").read_text())["settings"]["seed"] == int(seed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter"]  # no .tmp or .old folder left
