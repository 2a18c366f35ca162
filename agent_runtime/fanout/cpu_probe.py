"""One CPU-path decision per machine for all its workers, so they all run the same kernels.

Workers measuring at once, on cores the others load, could pick different kernels (fp32 sums in another order:
not the same game). Under a file lock the first worker measures and caches; the others read the cache.
"""

from __future__ import annotations

import fcntl


def decide_once(threads: int) -> None:
    """Measure or read the CPU path for `threads` under the machine-wide lock; load_for_cpu then reuses it."""
    from agent_runtime.cpu_path import cpu_path
    from agent_runtime.model_loader import cache_dir

    lock = cache_dir() / "cpu-probe" / ".fanout.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a")
    except OSError:  # no writable cache: each worker measures (what a single process would do too)
        cpu_path(threads=threads)
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        cpu_path(threads=threads)  # memoized in this process for the load that follows
