"""The manifest's pydantic model: docs/manifest.schema.json is current, recordings written before it still load, and a
manifest with a wrong field is one line naming the field (exit 2 from the CLI, no traceback)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_runtime.errors import UserError
from agent_runtime.recording.manifest import Manifest
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "recordings" / "sample"


def test_schema_file_is_current():
    schema = REPO / "docs" / "manifest.schema.json"
    assert schema.exists() and schema.read_text() == json.dumps(Manifest.model_json_schema(), indent=2) + "\n", (
        "docs/manifest.schema.json is out of date; regenerate it with "
        "`.venv/bin/python -m agent_runtime.recording.manifest > docs/manifest.schema.json`")


def test_sample_recording_loads_and_writes_back_the_same_keys(tmp_path):
    manifest = Manifest.read(SAMPLE / "manifest.json")
    assert manifest.lmp["file"] == "episode.lmp" and isinstance(manifest.extra, dict) and manifest.threads == 1
    manifest.write(tmp_path / "manifest.json")
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert written == json.loads((SAMPLE / "manifest.json").read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp file left


@pytest.mark.parametrize("change,needle", [
    ({"threads": True}, "'threads' is invalid"), ({"threads": "4"}, "'threads' is invalid"),
    ({"clock": 3}, "'clock' is invalid"), ({"packages": {"torch": 2}}, "'packages.torch' is invalid"),
    ({"lmp": []}, "'lmp' is invalid"), ({"scenario": None}, "'scenario' is invalid"),
    ({"config": None, "seeds": 1}, "(and 1 more problem)"), ({"format_version": True}, "unknown format_version"),
])
def test_a_wrong_field_is_one_line_naming_it(tmp_path, change, needle):
    data = {**json.loads((SAMPLE / "manifest.json").read_text()), **change}
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="manifest.json: ") as e:
        Manifest.read(tmp_path / "manifest.json")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_missing_field_null_extra_and_unknown_keys(tmp_path):
    data = json.loads((SAMPLE / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**data, "extra": None, "added_later": 1}))
    assert Manifest.read(tmp_path / "manifest.json").extra == {}
    del data["created"]
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="'created' is missing"):
        Manifest.read(tmp_path / "manifest.json")


def test_cli_names_the_bad_field_in_one_line_exit_2(tmp_path):
    copy = Path(shutil.copytree(SAMPLE, tmp_path / "bad"))
    data = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**data, "seeds": [1, 2]}))
    proc = run_cli("timeline", str(copy), cwd=REPO)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "manifest.json" in lines[0] and "'seeds' is invalid" in lines[0]
