"""`agent-runtime episode --workers N`: the serial run's episodes, played by Ray workers.

A worker builds the serial run's player and plays with the same function, so episode i plays seed + i with the
same actions and recording; each result goes to the command's on_result as episodes end.
"""

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path

from agent_runtime.fanout.episode_worker import decide_once
from agent_runtime.fanout.outcome import Outcome, Task, plain_args
from agent_runtime.fanout.worker_pool import RunStopped, run_on_ray
from agent_runtime.notices import warning_line
from agent_runtime.recording.write_guard import WriteGuard
from agent_runtime.session.episodes import MODEL_POLICIES, make_player, open_env, play_episode


class EpisodeJob:
    """What an `episode` worker holds: the player (the model, once) and where recordings go."""

    def __init__(self, args: argparse.Namespace, config, user_texts: dict, record_root: Path | None):
        self.args = plain_args(args)
        self.config, self.user_texts = config, user_texts
        self.record_root = record_root.resolve() if record_root is not None else None
        self.player = self.guard = None

    def setup(self, threads: int) -> dict:
        self.args.threads = threads  # the CPUs Ray reserved for this worker
        if self.args.policy in MODEL_POLICIES:
            decide_once(threads)
        env = open_env(self.config, self.config.seed, self.args.policy)
        try:
            self.player = make_player(self.args, self.config, env, self.user_texts)
        finally:
            env.close()
        self.guard = WriteGuard(self.args.on_disk_full)
        loaded = getattr(self.player, "loaded", None)
        return {"policy": self.args.policy, **({"model": loaded.model_id, "cpu_path": loaded.cpu.name} if loaded else {})}

    def play(self, task: Task) -> dict:
        index, seed = task.payload
        env = open_env(self.config, seed, self.args.policy)
        return play_episode(self.player, env, seed, index, self.record_root, self.guard)


def run_episodes(args: argparse.Namespace, config, user_texts: dict, record_root: Path | None,
                 on_result: Callable[[int, dict, str], None]) -> int:
    """Each result as it arrives to on_result(done, result, where) (done counts over all workers); exit code 1
    when an episode was lost (it failed on two workers), else 0."""
    tasks = [Task(i, (i, config.seed + i), f"episode {i}") for i in range(args.episodes)]
    job = EpisodeJob(args, config, user_texts, record_root)
    done = itertools.count(1)

    def arrived(task: Task, outcome: Outcome, worker) -> None:
        on_result(next(done), outcome.result, f"episode {task.key} ({worker.name()}): ")

    try:
        lost, _, _ = run_on_ray(args, job, tasks, arrived, command="episode")
    except RunStopped as e:  # the worker's guard printed nothing here: say it once
        warning_line(f"agent-runtime episode: {e}")
        return 1
    return 1 if lost else 0
