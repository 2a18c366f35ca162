"""What travels between the driver and a worker: the episode to play (Task) and how it ended (Outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class Outcome:
    status: str
    result: Any = None
    detail: str = ""
    recording: str | None = None  # the recording directory the attempt wrote, when there was one
    extras: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK
