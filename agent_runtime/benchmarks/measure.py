"""Small helpers shared by the benchmarks: medians with spread, percentile keys, the model and the machine header
they run on, plots."""

import contextlib
import platform
import statistics
from dataclasses import dataclass

import torch

from agent_runtime.model.cpu_path import allowed_cores
from agent_runtime.model.model_loader import load_for_cpu
from agent_runtime.notices import progress_bar, stderr_line
from agent_runtime.percentiles import percentile
from agent_runtime.session.clocks import measured


@dataclass
class Timing:
    """Median of repeated measurements with their spread (min..max), in seconds."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def ms(self) -> str:
        return f"{self.median * 1e3:.2f} ms [{min(self.samples) * 1e3:.2f}..{max(self.samples) * 1e3:.2f}]"


def interleaved(steps: dict, rounds: int, warmup: int = 1, timer=measured) -> dict:
    """Each step's Timing; the steps take turns round by round, so machine drift hits them all alike."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    samples = {k: [] for k in steps}
    for _ in range(rounds):
        for k, step in steps.items():
            samples[k].append(timer(step)[1])
    return {k: Timing(v) for k, v in samples.items()}


def machine_info(model_id: str, threads: int, clock: str, device: str = "cpu", cpu=None) -> dict:
    """What every benchmark prints first and stores: the machine, and the CPU path it decided (`cpu`)."""
    return {
        "cpu": (cpu.features.model_name if cpu is not None else "") or platform.processor() or platform.machine(),
        "cores": allowed_cores(), "threads": threads, "torch": torch.__version__, "python": platform.python_version(),
        "model": model_id, "device": device, "clock": clock,
        **({"cpu_path": cpu.name, "cpu_decision": cpu.describe()} if cpu is not None else {}),
    }


def load_bench_model(args, *, clock: str | None = None, device: str = "cpu", header: bool = True,
                     threads: int | None = None):
    """Threads (--threads), model and the machine header every benchmark prints first (a Ray worker's: the driver
    prints it). clock None: the episode benches', a fixed cost per token or the measured step time; threads: the
    CPUs Ray reserved for a worker (default --threads)."""
    adapter = getattr(args, "adapter", None)  # (filled from the config); kv and memory measure no skill
    loaded = load_for_cpu(args.model, dtype=args.dtype, threads=threads or getattr(args, "threads", None),
                          adapter=adapter, scenario=getattr(args, "scenario", None),
                          tokenizer=args.bench != "kv", announce=False)  # the header says it
    clock = clock or ("fixed_cost" if args.fixed_cost else "compute (world advanced by measured step time)")
    info = machine_info(loaded.model_id, loaded.cpu.threads, clock=clock, device=device, cpu=loaded.cpu)
    if header:
        print_header(info)
    return loaded, info


def print_header(info: dict) -> None:
    stderr_line("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))


_bar = None  # the running bench's bar (bench_bar), which progress() moves


@contextlib.contextmanager
def bench_bar(total: float, name: str, unit: str):
    """A bar with its ETA (notices.progress_bar) that the bench run inside moves by its progress lines (closed, it
    ignores them)."""
    global _bar
    with progress_bar(total, name, unit) as _bar:
        yield


def progress(msg: str | None, done: float | None = None) -> None:
    """A bench's progress line (None: none), and its bar to `done` (steps, frames or seconds; else one step on)."""
    if msg is not None:
        stderr_line(f"  .. {msg}")
    if _bar is not None:
        _bar.update(1 if done is None else max(0.0, round(done - _bar.n, 1)))


def shown(value, unit: str = "", spec: str = ".0f") -> str:
    """`value` formatted for a report, or "n/a" where nothing was measured (None)."""
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def stats(name: str, values, which=("p50", "p95", "max")) -> dict:
    """The result keys `name`_p50, `name`_p95, ... (None without values): the quantiles and extremes asked for."""
    extremes = {"min": 0, "max": 100}
    return {f"{name}_{w}": percentile(values, extremes[w] if w in extremes else float(w[1:])) for w in which}


def subplots(*args, **kwargs):
    """pyplot.subplots on the file-only Agg backend: the benchmarks run headless."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path, **savefig) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, **savefig)
    plt.close(fig)
