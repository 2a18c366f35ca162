"""Connect to Ray for one run: a local Ray started in-process, or an existing cluster at --ray-address.

Ray is imported here and only here. Each worker's CPUs are decided up front so workers never share a core; a run
that cannot get them is one clear error, not a hang.
"""

import signal
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent_runtime.errors import UserError, first_line
from agent_runtime.model.cpu_path import allowed_cores

LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # results are small dicts: do not reserve GBs of /dev/shm
CONNECT_TIMEOUT_S = 5.0
LOCAL_START_TRIES = 2


@dataclass
class Cluster:
    """The connected Ray and what each of this run's workers reserves."""

    ray: object
    address: str | None
    cpus_total: int
    cpus_per_worker: int

    def describe(self, workers: int) -> str:
        where = f"Ray cluster at {self.address}" if self.address else "local Ray"
        return (f"{where}: {self.cpus_total} CPU(s); {workers} worker(s) x {self.cpus_per_worker} CPU(s), "
                f"{self.cpus_per_worker} torch thread(s) each")


def _check_reachable(address: str) -> None:
    """An address nobody answers at fails in seconds with one line, instead of Ray's long retries."""
    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise UserError(f"--ray-address {address}: expected host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise UserError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None


def _init(ray, address: str | None) -> None:
    """ray.init with our signal handlers kept (Ray installs its own for SIGTERM). SIGINT is blocked while it
    starts local services: they inherit the mask, so a terminal's Ctrl-C (sent to the whole process group)
    cannot kill them before the workers have closed their recordings; here it is delivered once init is done."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and address is None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    if address is None:
        kwargs.update(num_cpus=allowed_cores(), object_store_memory=LOCAL_OBJECT_STORE_BYTES)  # what a local Ray offers
    try:
        for tries_left in range(LOCAL_START_TRIES - 1, -1, -1):
            try:
                ray.init(address=address, **kwargs)
                break
            except Exception as e:  # Ray gives its local services 30 s: a busy machine may need a second go
                ray.shutdown()
                if address is not None or "timed out during startup" not in str(e) or not tries_left:
                    raise
    except Exception as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise UserError(f"cannot start {where}: {first_line(e)}") from None
    finally:
        if main_thread:
            for sig, handler in saved.items():
                if handler is not None:
                    signal.signal(sig, handler)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _errors_to_stderr() -> None:
    """Ray prints the errors its raylet pushes ("A worker died ...") on the driver's stdout, where `--json`
    promises one object per line: send them to stderr. A private hook, left alone where it is missing: Ray has
    no public switch (ray.init's error listener prints them with is_err False whatever log_to_driver says)."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "to_stderr", False):
        return

    def to_stderr(data, ignore_prefix):
        return original({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True
    ray_worker.print_to_stdstream = to_stderr


def _cpus_per_worker(cpus_total: int, workers: int, threads: int | None, where: str = "the Ray cluster") -> int:
    """--threads, else an equal share of the CPUs; more than there are is an error, never oversubscription."""
    per = threads or max(1, cpus_total // workers)
    if per * workers > cpus_total:
        raise UserError(f"{workers} worker(s) x {per} CPU(s) need {per * workers} CPUs; {where} has "
                        f"{cpus_total}: use fewer --workers (or fewer --threads)")
    return per


@contextmanager
def connect(address: str | None, workers: int, threads: int | None = None):
    """Yield a Cluster; a Ray started here is shut down on the way out (an existing cluster is only left)."""
    if address:
        _check_reachable(address)
    else:
        _cpus_per_worker(allowed_cores(), workers, threads, "this machine")  # a bad --workers fails before Ray starts
    try:
        import ray
    except ImportError:
        raise UserError("--workers/--ray-address need Ray: pip install 'doom-agent-runtime[ray]' "
                        "(or pip install ray)") from None
    started_here = not ray.is_initialized()
    try:
        if started_here:
            _init(ray, address)
        _errors_to_stderr()
        cpus_total = int(ray.cluster_resources().get("CPU", 0))
        yield Cluster(ray, address, cpus_total, _cpus_per_worker(cpus_total, workers, threads))
    finally:
        if started_here:
            ray.shutdown()
