"""The commentary's labels as data: `collect --remarks` runs the commentary stream and stores, per remark, the tokens
its view read and the describer's remark for that view (remarks.jsonl), true to what the view shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent_runtime.engine.prompts import COMMENTARY_PROMPT
from agent_runtime.model.model_loader import load_tokenizer
from agent_runtime.thinking.vocabulary import parse_claims
from agent_runtime.training.decision_log import REMARKS, complete_bytes, parse_decisions
from envs.observation_text import parse_seen
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def _collect(out: Path, *args: str):
    return run_cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--out", str(out),
                   "--episodes", "1", "--max-tics", "400", *args, cwd=REPO)


def test_collect_with_remarks_stores_the_describers_remark_for_each_remark_view(tmp_path):
    proc = _collect(tmp_path / "r", "--remarks")
    assert proc.returncode == 0, proc.stderr
    remarks = parse_decisions(complete_bytes(tmp_path / "r", REMARKS))
    tok = load_tokenizer()
    prompt = tok.encode(COMMENTARY_PROMPT, add_special_tokens=False)
    assert len(remarks) >= 2  # one every 4 s of game time: 400 tics are 11.4 s
    for r in remarks:
        assert r["prompt"] == prompt and tok.decode(r["target"]) == f" {r['remark']}\n"
        claims, noise = parse_claims(r["remark"].rstrip("."))
        assert claims and not noise
        view = tok.decode(r["tokens"])
        newest = r["isolated"][-1]  # the view's last block is its newest frame line: the remark says what it shows
        seen = parse_seen(tok.decode(r["tokens"][newest[0]:newest[1]]))
        assert sum(c.count for c in claims if c.kind == "seen") == len(seen), (r["remark"], seen)
        ammo = re.findall(r"ammo (\d+)", view)[-1]  # the newest status line's
        assert [c.value for c in claims if c.kind == "ammo"] == [int(ammo)]
        assert not any(c.kind == "doing" for c in claims)  # the command under way is not in the remark's view
    episode = json.loads((tmp_path / "r" / "episodes.jsonl").read_text())
    assert episode["remarks"] == len(remarks) and episode["remarks_bytes"] > 0
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["remarks"] is True

    proc = _collect(tmp_path / "n")  # without --remarks: no commentary, no remark labels
    assert proc.returncode == 0, proc.stderr
    assert complete_bytes(tmp_path / "n", REMARKS) == b""
    assert json.loads((tmp_path / "n" / "episodes.jsonl").read_text())["remarks"] == 0


def test_train_learns_the_remarks_beside_the_commands_and_notes(tmp_path):
    data = tmp_path / "data"
    proc = run_cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--out", str(data),
                   "--episodes", "2", "--max-tics", "300", "--remarks", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    n_remarks = len(parse_decisions(complete_bytes(data, REMARKS)))
    adapter = tmp_path / "adapter"
    proc = run_cli("train", "--data", str(data), "--out", str(adapter), "--steps", "16", "--threads", "1",
                   "--held-out", "0.5", "--lr", "0.01", "--layers-from", "0", "--no-notes", "--json", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((adapter / "manifest.json").read_text())
    remarks, losses = manifest["remarks"], manifest["history"]["remark_losses"]
    assert remarks["train"] > 0 and remarks["train"] + remarks["held_out"] == n_remarks
    # the describer's words are being learnt: a tiny random model starts near ln(vocabulary) = 10.8 a token and
    # moves slowly (measured: 10.5 -> 9.9 over the first and last four of 16 steps)
    assert len(losses) == 16 and sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.4, losses
    assert manifest["notes"]["train"] == 0  # left out here: their words overlap the remarks' and would teach them too
    reported = json.loads(proc.stdout)["remarks"]
    assert (reported is None) == (remarks["held_out"] == 0)
    proc = run_cli("train", "--data", str(data), "--out", str(tmp_path / "plain"), "--steps", "2", "--threads", "1",
                   "--held-out", "0.5", "--no-remarks", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    plain = json.loads((tmp_path / "plain" / "manifest.json").read_text())
    assert plain["remarks"]["train"] == 0 and plain["history"]["remark_losses"] == []
    assert plain["data_hash"] == manifest["data_hash"]  # the same data; only what is trained differs
