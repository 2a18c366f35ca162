"""Which episode a free worker plays next, and the retry rule: an episode whose worker failed is played once
more, by another worker when there is one; a second failure loses it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from agent_runtime.fanout.outcome import Task

MAX_ATTEMPTS = 2  # the first try and one retry


@dataclass
class Attempt:
    task: Task
    number: int = 1  # 1: first try, 2: the retry
    avoid_worker: int | None = None  # the worker it failed on


class TaskQueue:
    """Tasks in their given order; retries go to the front so a lost worker delays its episode least."""

    def __init__(self, tasks: list[Task]):
        self._pending: deque[Attempt] = deque(Attempt(t) for t in tasks)
        self.lost: list[tuple[Task, str]] = []

    def __bool__(self) -> bool:
        return bool(self._pending)

    def next_for(self, worker_id: int, *, others_alive: bool) -> Attempt | None:
        """The first attempt this worker may play; one that failed on it only when no other worker lives."""
        for attempt in self._pending:
            if attempt.avoid_worker != worker_id or not others_alive:
                self._pending.remove(attempt)
                return attempt
        return None

    def failed(self, attempt: Attempt, worker_id: int, reason: str) -> bool:
        """Requeue the attempt for one retry elsewhere (True), or count the task lost (False)."""
        if attempt.number < MAX_ATTEMPTS:
            self._pending.appendleft(Attempt(attempt.task, attempt.number + 1, avoid_worker=worker_id))
            return True
        self.lost.append((attempt.task, reason))
        return False

    def drop_all(self, reason: str) -> None:
        """No worker is left to play what is pending: it is all lost."""
        while self._pending:
            self.lost.append((self._pending.popleft().task, reason))
