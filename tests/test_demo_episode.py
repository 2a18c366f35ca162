"""`make demo` on this CPU path: the embedded model plays on the measured compute clock, so the test is timed (a
starved process ages its frames past the bound): make test runs it, and its forced-path passes, in the timed lane."""

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.cpu_sensitive  # `make test` runs it again on the other CPU paths
def test_the_demo_episode_acts_on_this_cpu_path():
    """`make demo`: the embedded model, default config (dtype auto), measured compute clock: actions reach the
    game instead of all being fenced by age, and the result names the CPU path it ran on."""
    proc = run_cli("episode", "--scenario", "defend_the_center", "--max-tics", "175", "--json", "--no-record", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "cpu path " in proc.stderr.splitlines()[0]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["cpu_path"].split("-")[1] in ("fp32", "bf16")
    assert result["actions_executed"] > 5 and result["actions_executed"] > result["actions_fenced"]
