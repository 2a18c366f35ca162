"""What travels between the driver and a worker: the options (plain_args), the episode to play (Task) and how it
ended (Outcome)."""

import argparse
from dataclasses import dataclass
from typing import Any

OK = "ok"
INTERRUPTED = "interrupted"  # the run was stopped (SIGINT/SIGTERM on the driver); the recording is closed
ENGINE_DIED = "engine_died"  # the worker lives, its ViZDoom engine died or hung: worth one more try
USER_ERROR = "user_error"  # bad input only the worker could see (a model path missing on its machine)
ERROR = "error"  # a bug: the worker's traceback in detail
RUN_STOPPED = "run_stopped"  # the worker's recordings disk failed under --on-disk-full stop: the run ends, exit 1


@dataclass(frozen=True)
class Task:
    """One episode for a worker: `key` names it in results (an index, or (index, agent)), `payload` is the job's."""

    key: Any
    payload: Any
    label: str  # how progress and error lines name it ("episode 3", "episode 3 sequential")


def plain_args(args: argparse.Namespace) -> argparse.Namespace:
    """The command's options as a job carries them to its workers: without the driver's own "_" entries."""
    return argparse.Namespace(**{k: v for k, v in vars(args).items() if not k.startswith("_")})


@dataclass
class Outcome:
    status: str
    result: Any = None
    detail: str = ""
    recording: str | None = None  # the recording directory the attempt wrote, when there was one
