"""The driver's side: N worker actors, tasks handed to whichever is free, outcomes streamed as episodes end.

An episode whose worker or engine died is named on stderr and played again once elsewhere (TaskQueue); a dead
worker is replaced. SIGINT/SIGTERM asks every worker to stop and close its recording, then ends the actors.
"""

import os
import signal
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Callable

from agent_runtime import signals
from agent_runtime.errors import UserError
from agent_runtime.fanout.episode_worker import EpisodeWorker
from agent_runtime.fanout.outcome import ENGINE_DIED, ERROR, INTERRUPTED, OK, RUN_STOPPED, USER_ERROR, Outcome, Task
from agent_runtime.fanout.ray_cluster import Cluster, connect
from agent_runtime.notices import stderr_line, warning_line

WAIT_S = 0.2  # how often the driver looks at signals while it waits
STOP_TIMEOUT_S = 15.0  # how long stopped workers get to close their recordings
ENV_PASSED = ("DOOM_AGENT_CPU", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")  # the CPU-path overrides
MAX_ATTEMPTS = 2  # the first try and one retry


@dataclass
class Attempt:
    task: Task
    number: int = 1  # 1: first try, 2: the retry
    avoid_worker: int | None = None  # the worker it failed on


class TaskQueue:
    """Which episode a free worker plays next, in the given order, and the retry rule: an episode whose worker
    failed is played once more, first (a lost worker delays it least), by another worker when there is one; a
    second failure loses it."""

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


class WorkerError(RuntimeError):
    """A bug inside a worker: its message carries the worker's traceback."""


class RunStopped(Exception):
    """A worker asked the whole run to stop (its recordings disk failed under --on-disk-full stop): exit 1."""


@dataclass(eq=False)
class Worker:
    id: int
    actor: Any
    ready_ref: Any = None
    info: dict | None = None  # what ready() said (pid, host, threads, job's description)
    attempt: Attempt | None = None  # what it plays now
    alive: bool = True
    started: float = field(default_factory=time.monotonic)

    def name(self) -> str:
        pid = self.info.get("pid") if self.info else None
        return f"worker {self.id}" + (f" (pid {pid})" if pid else "")


class WorkerPool:
    """Workers for one run; `run` plays every task and returns the tasks lost (failed twice)."""

    def __init__(self, cluster: Cluster, job, workers: int, *, command: str):
        self.cluster, self.job, self.command = cluster, job, command
        env_vars = {k: os.environ[k] for k in ENV_PASSED if k in os.environ}
        options = dict(num_cpus=cluster.cpus_per_worker, max_concurrency=2, max_restarts=0, max_task_retries=0)
        if env_vars and cluster.address:  # a local Ray inherits this environment already
            options["runtime_env"] = {"env_vars": env_vars}
        self._actor_class = cluster.ray.remote(EpisodeWorker).options(**options)
        self.workers: list[Worker] = []
        self._replacements_left = workers
        self._inflight: dict[Any, Worker] = {}
        self.first_info: dict | None = None
        self._on_ready_hook: Callable[[Worker], None] | None = None
        for _ in range(workers):
            self._start_worker()

    def _start_worker(self) -> None:
        actor = self._actor_class.remote(self.job, self.cluster.cpus_per_worker)
        worker = Worker(len(self.workers), actor)
        worker.ready_ref = actor.ready.remote()
        self.workers.append(worker)

    def _live(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def _say(self, text: str) -> None:
        warning_line(f"agent-runtime {self.command}: {text}")

    def run(self, tasks: list[Task], on_result: Callable[[Task, Outcome, Worker], None],
            on_ready: Callable[[Worker], None] | None = None) -> list[tuple[Task, str]]:
        """on_result: each episode as it ends; on_ready: each worker once loaded (may raise to end the run)."""
        queue = TaskQueue(tasks)
        self._on_ready_hook = on_ready
        stop_signum = None
        try:
            with signals.stoppable():
                while queue or self._inflight:
                    self._assign(queue)
                    if not self._inflight and not any(w.alive for w in self.workers):
                        queue.drop_all("no worker left")
                        break
                    self._wait_once(queue, on_result)
                    signals.check()
        except signals.Interrupted as e:
            stop_signum = e.signum
            raise
        finally:
            self._finish(stop_signum, on_result)
        return queue.lost

    def _assign(self, queue: TaskQueue) -> None:
        for worker in self._live():
            if worker.info is None or worker.attempt is not None or not queue:
                continue
            attempt = queue.next_for(worker.id, others_alive=len(self._live()) > 1)
            if attempt is not None:
                worker.attempt = attempt
                self._inflight[worker.actor.play.remote(attempt.task)] = worker

    def _wait_once(self, queue: TaskQueue, on_result) -> None:
        readying = {w.ready_ref: w for w in self._live() if w.info is None and w.ready_ref is not None}
        refs = list(self._inflight) + list(readying)
        if not refs:  # nothing to wait on (a retry waits for a worker other than the one it failed on)
            time.sleep(WAIT_S)
            return
        done, _ = self.cluster.ray.wait(refs, num_returns=1, timeout=WAIT_S)
        for ref in done:
            if ref in readying:
                self._on_ready(readying[ref], ref)
            else:
                self._on_played(self._inflight.pop(ref), ref, queue, on_result)

    def _get(self, ref) -> tuple[Outcome | None, str]:
        """The call's outcome, or None and why when the worker's process is gone."""
        from ray.exceptions import RayError

        try:
            return self.cluster.ray.get(ref), ""
        except RayError as e:
            return None, _ray_reason(e)

    def _on_ready(self, worker: Worker, ref) -> None:
        outcome, reason = self._get(ref)
        worker.ready_ref = None
        if outcome is None:
            self._say(f"error: {worker.name()} died while loading: {reason}")
            self._worker_died(worker)
            return
        self._raise_on_error(outcome, worker)
        worker.info = outcome.result
        self.first_info = self.first_info or outcome.result
        took = time.monotonic() - worker.started
        described = ", ".join(f"{k} {v}" for k, v in outcome.result.items()
                              if k not in ("pid", "host") and not k.startswith("_"))  # "_": data, not for the line
        stderr_line(f"{worker.name()} ready on {worker.info.get('host')} in {took:.1f} s: {described}")
        if self._on_ready_hook is not None:
            self._on_ready_hook(worker)

    def _on_played(self, worker: Worker, ref, queue: TaskQueue, on_result) -> None:
        attempt, worker.attempt = worker.attempt, None
        outcome, reason = self._get(ref)
        if outcome is None:
            self._retry(queue, attempt, worker, f"{worker.name()} died during {attempt.task.label}: {reason}")
            self._worker_died(worker)
            return
        self._raise_on_error(outcome, worker)
        if outcome.status in (ENGINE_DIED, INTERRUPTED):
            where = f"; its recording is closed as incomplete: {outcome.recording}" if outcome.recording else ""
            self._retry(queue, attempt, worker, f"{attempt.task.label} on {worker.name()}: {outcome.detail}{where}")
            return
        on_result(attempt.task, outcome, worker)

    def _raise_on_error(self, outcome: Outcome, worker: Worker) -> None:
        if outcome.status == USER_ERROR:  # the user's own words, not a worker's
            raise UserError(outcome.detail)
        if outcome.status in (ERROR, RUN_STOPPED):
            raise {ERROR: WorkerError, RUN_STOPPED: RunStopped}[outcome.status](f"{worker.name()}: {outcome.detail}")

    def _retry(self, queue: TaskQueue, attempt: Attempt, worker: Worker, what: str) -> None:
        if queue.failed(attempt, worker.id, what):
            self._say(f"error: {what}; {attempt.task.label} is played again on another worker")
        else:
            self._say(f"error: {what}; it failed twice and is lost")

    def _worker_died(self, worker: Worker) -> None:
        """Its process is gone: a fresh worker takes its place while the run's replacements last."""
        worker.alive = False
        self._kill(worker)
        if self._replacements_left > 0:
            self._replacements_left -= 1
            self._start_worker()
            self._say(f"starting worker {self.workers[-1].id} in place of {worker.name()}")

    def _finish(self, stop_signum: int | None, on_result) -> None:
        """A stop: every busy worker closes its episode's recording first (an episode that ended meanwhile is
        reported as usual). Then the actors end."""
        if self._inflight:
            for worker in set(self._inflight.values()):
                worker.actor.stop.remote(stop_signum or signal.SIGINT)
            done, _ = self.cluster.ray.wait(list(self._inflight), num_returns=len(self._inflight),
                                            timeout=STOP_TIMEOUT_S)
            for ref in done:
                worker = self._inflight[ref]
                outcome, _ = self._get(ref)
                if outcome is not None and outcome.status == OK:
                    on_result(worker.attempt.task, outcome, worker)
                elif outcome is not None and outcome.recording:
                    warning_line(f"recording (incomplete, {outcome.status}): {outcome.recording}")
            self._inflight.clear()
        for worker in self.workers:
            self._kill(worker)

    def _kill(self, worker: Worker) -> None:
        with suppress(Exception):  # already gone
            self.cluster.ray.kill(worker.actor)


def run_on_ray(args, job, tasks: list[Task], on_result: Callable[[Task, Outcome, Worker], None], *, command: str,
               on_ready: Callable[[Worker], None] | None = None) -> tuple[list[tuple[Task, str]], dict, str]:
    """What every fanned-out command does: connect (--ray-address, else a local Ray), start --workers workers
    and play every task on them. Returns the tasks lost, the first loaded worker's info and the cluster line."""
    with connect(args.ray_address, args.workers, args.threads) as cluster:
        described = cluster.describe(args.workers)
        stderr_line(described)
        pool = WorkerPool(cluster, job, args.workers, command=command)
        return pool.run(tasks, on_result, on_ready=on_ready), pool.first_info or {}, described


def _ray_reason(e: BaseException) -> str:
    """Ray's death messages run to many lines: the first one that says something."""
    for line in str(e).splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line[:200].rstrip(".")
    return type(e).__name__
