"""Fan-out without a Ray cluster: the retry rule, bad --workers/--ray-address input, and a run that never needs Ray.

These tolerate load, so they run on both cores with the other such files; tests/test_fanout.py plays on Ray.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_runtime.fanout.outcome import Task
from agent_runtime.fanout.worker_pool import TaskQueue
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def test_a_retry_goes_first_to_another_worker_and_a_second_failure_loses_the_task():
    queue = TaskQueue([Task(i, None, f"episode {i}") for i in range(3)])
    first = queue.next_for(0, others_alive=True)
    assert first.task.key == 0 and first.number == 1
    assert queue.failed(first, 0, "worker 0 died")
    assert queue.next_for(0, others_alive=True).task.key == 1  # worker 0 may not take episode 0 again
    retry = queue.next_for(1, others_alive=True)
    assert retry.task.key == 0 and retry.number == 2
    assert not queue.failed(retry, 1, "worker 1 died")
    assert [t.key for t, _ in queue.lost] == [0]
    alone = TaskQueue([Task(5, None, "episode 5")])
    a = alone.next_for(0, others_alive=False)
    alone.failed(a, 0, "engine died")
    assert alone.next_for(0, others_alive=False).task.key == 5  # the only worker left takes its retry


@pytest.mark.parametrize("argv, expected", [
    (["episode", "--workers", "0"], "--workers must be at least 1 (got 0)"),
    (["episode", "--policy", "random", "--workers", "1000"], "need 1000 CPUs"),
    (["episode", "--policy", "random", "--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
    (["episode", "--ray-address", "no-port"], "expected host:port"),
    (["bench", "play", "--workers", "-1"], "--workers must be at least 1"),
    (["bench", "reaction", "--workers", "0"], "--workers must be at least 1"),
    (["collect", "--episodes", "1", "--out", "{tmp}/data", "--workers", "0"], "--workers must be at least 1"),
])
def test_bad_fanout_input_is_one_line_and_exit_2(tmp_path, argv, expected):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + (["--max-tics", "5"] if argv[0] != "collect" else [])
    proc = run_cli(*argv, cwd=REPO)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_a_single_process_run_never_imports_ray(tmp_path):
    code = ("import sys\nfrom agent_runtime.cli import main\n"
            "assert main(['episode', '--policy', 'random', '--max-tics', '5', '--no-record']) == 0\n"
            "print('ray' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


