"""The CPU path: probe the processor once and decide model precision, linear kernels per row count and threads.

Nothing is assumed: bf16 is ~2x faster than fp32 for a 1-row step where the CPU multiplies bf16 in hardware and
~5x slower for a 38-row step where it does not, and oneDNN's prepacked weights win for a few rows but not for
one. The CPU's features decide what is eligible, a ~1 s probe what is fastest; the result is cached per machine.
`DOOM_AGENT_CPU=avx2|avx512` forces that answer (tests force avx2 so any x86 machine proves the AVX2 path);
`model.dtype` overrides the precision, with one warning when the CPU serves it badly.
"""

import contextlib
import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path

import psutil
import torch
import torch.nn.functional as F

from agent_runtime.atomic_write import write_json_atomic
from agent_runtime.errors import UserError

OVERRIDE_ENV = "DOOM_AGENT_CPU"
OVERRIDES = ("avx2", "avx512")
PROBE_VERSION = 4
PROBE_ROWS = (1, 2, 4, 8, 16, 32)  # a step's rows: decodes (1-8), a decision with its frame (~20-40)
# rows that stand for the engine's steps when two precisions are compared: a Thinker/commentary decode and a
# decision step (frame prefill + action prompt + command branches)
DECISION_ROWS = 32
# one decoder layer's linears at the embedded model's shapes (SmolLM2-135M: hidden 576, 3 KV heads of 64,
# MLP 1536), repeated over enough layers (~85 MB in fp32) that the weights stream from memory as in the real
# model instead of sitting in the last-level cache, which favours other kernels
PROBE_SHAPES = ((576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536))
PROBE_LAYERS = 6
KERNELS = ("native", "onednn")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
SHORT = {"float32": "fp32", "bfloat16": "bf16"}
HARDWARE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "avx_ne_convert")  # x86; ARM reports "bf16"


@dataclass(frozen=True)
class CpuFeatures:
    """What the processor offers, as torch and the kernel flags see it (after any override)."""

    arch: str  # x86_64, aarch64, ...
    isa: str  # torch's kernel level: AVX512, AVX2, DEFAULT, ...
    hardware_bf16: bool  # bf16 multiplies in hardware (AVX512-BF16, AMX, AVX-NE-CONVERT, ARM BF16)
    onednn_bf16: bool  # oneDNN runs bf16 GEMMs here (hardware bf16, or AVX-512 BW/VL/DQ)
    onednn: bool  # oneDNN (mkldnn) built in and able to prepack linears
    cores: int  # cores this process may run on
    model_name: str = ""  # the CPU's model string, for the cache key and the header
    forced: str | None = None  # DOOM_AGENT_CPU, when set

    @property
    def bf16_eligible(self) -> bool:
        return self.hardware_bf16 or self.onednn_bf16


def _cpu_flags() -> tuple[set[str], str]:
    """The kernel's CPU flags and model name (Linux); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set(), platform.processor()
    flags, name = set(), ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key in ("model name", "CPU part") and not name:
            name = value.strip()
    return flags, name or platform.processor()


def allowed_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def detect_features() -> CpuFeatures:
    """The CPU's features, with DOOM_AGENT_CPU applied (an impossible override is a clear error)."""
    flags, name = _cpu_flags()
    arch = platform.machine().lower()
    forced = os.environ.get(OVERRIDE_ENV, "").strip().lower()
    if forced not in OVERRIDES + ("auto", ""):
        raise UserError(f"{OVERRIDE_ENV}={forced!r} is not a CPU path: use one of {', '.join(OVERRIDES)} or auto (or unset it)")
    forced = forced if forced in OVERRIDES else None
    onednn = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    hardware_bf16 = bool(flags & set(HARDWARE_BF16_FLAGS)) or (arch in ("aarch64", "arm64") and "bf16" in flags)
    onednn_bf16 = onednn and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    isa = torch.backends.cpu.get_cpu_capability()
    if forced == "avx2":
        if arch not in ("x86_64", "amd64") or "avx2" not in flags:
            raise UserError(f"{OVERRIDE_ENV}=avx2 needs an x86 CPU with AVX2; this one ({name or arch}) has none: unset it")
        isa, hardware_bf16, onednn_bf16 = "AVX2", False, False
    elif forced == "avx512":
        if "avx512f" not in flags:
            raise UserError(f"{OVERRIDE_ENV}=avx512: this CPU ({name or arch}) has no AVX-512; unset it or use avx2")
        isa = "AVX512"
    return CpuFeatures(arch=arch, isa=isa, hardware_bf16=hardware_bf16, onednn_bf16=onednn_bf16, onednn=onednn,
                       cores=allowed_cores(), model_name=name, forced=forced)


def cache_dir() -> Path:
    """Where converted models and CPU probes are kept: DOOM_AGENT_CACHE, else the XDG cache."""
    xdg = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return Path(os.environ.get("DOOM_AGENT_CACHE") or os.path.join(xdg, "doom-agent-runtime"))


def free_cores() -> int:
    """Cores not busy right now (sampled), at least 1: oversubscribing makes CPU decode several times slower.
    Real-time play needs no core of its own: the game and audio threads take well under half a core."""
    try:
        busy = sum(1 for p in psutil.cpu_percent(interval=0.2, percpu=True) if p > 50.0)
    except Exception:
        busy = round(os.getloadavg()[0])
    return max(1, allowed_cores() - busy)


def onednn_available(dtype: torch.dtype, features: CpuFeatures) -> bool:
    """Whether oneDNN can prepack linears of `dtype` here."""
    return features.onednn and (dtype == torch.float32 or (dtype == torch.bfloat16 and features.onednn_bf16))


@dataclass(frozen=True)
class KernelTable:
    """For one precision: the kernel a linear of `rows` rows takes (`bounds`: rows up to the first bound take
    the first kernel, ...; the last kernel covers every larger step)."""

    dtype: str
    bounds: tuple[int, ...]
    kernels: tuple[str, ...]

    def kernel_for(self, rows: int) -> str:
        return next((kernel for bound, kernel in zip(self.bounds, self.kernels) if rows <= bound), self.kernels[-1])

    def describe(self) -> str:
        lows = (1,) + tuple(bound + 1 for bound in self.bounds[:-1])
        spans = [f"{low}" if low == bound else f"{low}-{bound}" for low, bound in zip(lows, self.bounds[:-1])]
        return ", ".join(f"{span} rows {kernel}" for span, kernel in zip(spans + [f"{lows[-1]}+"], self.kernels))


def _table_from(dtype: str, best: dict[int, str]) -> KernelTable:
    """Merge the fastest kernel at each probed row count into contiguous ranges (the last one open-ended)."""
    runs = [(kernel, max(rows for rows, _ in run)) for kernel, run in groupby(sorted(best.items()), key=itemgetter(1))]
    return KernelTable(dtype, tuple(b for _, b in runs[:-1]) + (PROBE_ROWS[-1],), tuple(k for k, _ in runs))


def _time_linears(dtype: torch.dtype, kernel: str, rows: int, weights, packed) -> float:
    """ms for the probe's linears at `rows` rows (oneDNN off for native bf16, as the runner does)."""
    xs = {n: torch.randn(1, rows, n, dtype=dtype) for n in {s[1] for s in PROBE_SHAPES}}
    with torch.inference_mode(), linear_step(kernel == "native" and dtype == torch.bfloat16):
        t0 = time.perf_counter()
        for w, p in zip(weights, packed):
            x = xs[w.shape[1]]
            if kernel == "onednn":
                torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
            else:
                F.linear(x, w)
        return (time.perf_counter() - t0) * 1000.0


def measure_linears(features: CpuFeatures, threads: int, *, rounds: int = 3) -> dict[str, dict[str, dict[int, float]]]:
    """{dtype: {kernel: {rows: ms}}} for PROBE_LAYERS layers' linears, on `threads` threads.

    Every candidate is timed once per round, rounds interleaved, and keeps its fastest round: a burst of
    load from elsewhere hits all candidates alike instead of deciding the comparison."""
    gen = torch.Generator().manual_seed(0)
    base = [torch.randn(*shape, generator=gen) * 0.02 for _ in range(PROBE_LAYERS) for shape in PROBE_SHAPES]
    candidates = []
    for dtype in (torch.float32, torch.bfloat16):
        weights = [w.to(dtype) for w in base]
        # a precision this CPU does not run natively is only priced (for the warning), not tuned
        rows = PROBE_ROWS if dtype == torch.float32 or features.bf16_eligible else (1, DECISION_ROWS)
        for kernel in KERNELS:
            if kernel == "onednn" and not onednn_available(dtype, features):
                continue
            packed = ([torch.ops.mkldnn._reorder_linear_weight(w, DECISION_ROWS) for w in weights]
                      if kernel == "onednn" else [None] * len(weights))
            candidates.append((DTYPE_NAMES[dtype], kernel, dtype, weights, packed, rows))
    timings: dict[str, dict[str, dict[int, float]]] = {}
    with torch_threads(threads):
        for round_ in range(rounds + 1):  # round 0 warms up (caches, oneDNN's primitive cache) and is not kept
            for name, kernel, dtype, weights, packed, rows in candidates:
                for n in rows:
                    ms = _time_linears(dtype, kernel, n, weights, packed)
                    best = timings.setdefault(name, {}).setdefault(kernel, {}) if round_ else {}
                    best[n] = min(ms, best.get(n, ms))
    return timings


def _best(per_kernel: dict[str, dict[int, float]], rows: int) -> tuple[str, float]:
    return min(((k, t[rows]) for k, t in per_kernel.items()), key=lambda kt: kt[1])


@dataclass
class CpuPath:
    """The decision: precision, kernels per row count for each precision, threads, and why."""

    features: CpuFeatures
    threads: int
    timings: dict[str, dict[str, dict[int, float]]]
    dtype: str = "float32"
    requested_dtype: str = "auto"
    source: str = "probe"  # probe (measured now) or cache
    tables: dict[str, KernelTable] = field(default_factory=dict)
    warning: str | None = None

    @property
    def name(self) -> str:
        """A short label such as avx2-fp32-onednn or avx512-bf16-onednn (the kernel of a decision step)."""
        return f"{self.features.isa.lower()}-{SHORT[self.dtype]}-{self.table(self.dtype).kernel_for(DECISION_ROWS)}"

    def table(self, dtype: torch.dtype | str) -> KernelTable:
        name = dtype if isinstance(dtype, str) else DTYPE_NAMES.get(dtype, "float32")
        return self.tables.get(name) or KernelTable(name, (PROBE_ROWS[-1],), ("native",))

    def describe(self) -> str:
        f = self.features
        bf16 = ("hardware bf16" if f.hardware_bf16 else "oneDNN bf16" if f.onednn_bf16 else "no native bf16")
        forced = f", forced by {OVERRIDE_ENV}={f.forced}" if f.forced else ""
        return (f"cpu path {self.name}: {f.isa}, {bf16}{forced}; {self.dtype} linears "
                f"{self.table(self.dtype).describe()}; {self.threads} thread(s) ({self.source})")

    def summary(self) -> dict:
        """What manifests and benchmark headers store."""
        return {"cpu_path": self.name, "dtype": self.dtype, "requested_dtype": self.requested_dtype,
                "kernels": self.table(self.dtype).describe(),
                **{key: getattr(self.features, key) for key in ("isa", "hardware_bf16", "onednn_bf16", "forced")},
                "threads": self.threads, "cpu": self.features.model_name, "probe": self.source}


def decide(features: CpuFeatures, threads: int, timings: dict, *, requested: str = "auto",
           source: str = "probe") -> CpuPath:
    """Pick the precision (bf16 only where eligible and measured faster) and each precision's kernels."""
    tables = {}
    for dtype, per_kernel in timings.items():
        measured = sorted(set.intersection(*(set(t) for t in per_kernel.values())))
        tables[dtype] = _table_from(dtype, {rows: _best(per_kernel, rows)[0] for rows in measured})
    # what a precision costs the engine: one decode row plus one decision step, each on its fastest kernel
    cost = {dtype: _best(pk, 1)[1] + _best(pk, DECISION_ROWS)[1] for dtype, pk in timings.items()}
    fastest = ("bfloat16" if features.bf16_eligible and "bfloat16" in cost and cost["bfloat16"] < cost["float32"]
               else "float32")
    path = CpuPath(features=features, threads=threads, timings=timings, requested_dtype=requested, source=source,
                   tables=tables, dtype=fastest if requested == "auto" else requested)
    if requested not in ("auto", fastest) and requested in cost:
        slower = cost[requested] / cost[fastest]
        why = "" if requested != "bfloat16" or features.bf16_eligible else " (this CPU has no native bf16)"
        path.warning = (f"warning: model.dtype {requested} on this CPU{why}: its linears measured {slower:.1f}x "
                        f"slower than {fastest} for the engine's steps; set model.dtype to auto or {fastest}")
    return path


def _cache_key(features: CpuFeatures, threads: int) -> str:
    parts = [features.model_name, features.arch, features.isa, str(features.hardware_bf16), str(features.onednn_bf16),
             str(features.forced), torch.__version__, str(threads), os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
             os.environ.get("ATEN_CPU_CAPABILITY", ""), str(PROBE_VERSION)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _read_cached(path: Path) -> dict | None:
    """The cached timings, or None when absent or unreadable (then the probe runs again)."""
    try:
        data = json.loads(path.read_text())
        return {d: {k: {int(r): float(t) for r, t in rows.items()} for k, rows in ks.items()}
                for d, ks in data["timings"].items()} if data.get("version") == PROBE_VERSION else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cached(path: Path, features: CpuFeatures, threads: int, timings: dict) -> None:
    """Atomic; a cache that cannot be written only costs a probe next time."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"version": PROBE_VERSION, "features": asdict(features), "threads": threads,
                                 "torch": torch.__version__, "timings": timings})


_MEASURED: dict[tuple, tuple[dict, str]] = {}  # (features, threads) -> (timings, "probe" or "cache")


def cpu_path(*, dtype: str = "auto", threads: int | None = None) -> CpuPath:
    """Probe (or read the cache) and decide. `dtype` as config and CLI checked it; `threads` None: the cores free."""
    features, n = detect_features(), threads or free_cores()
    key = (features, n)
    if key not in _MEASURED:
        cache = cache_dir() / "cpu-probe" / f"{_cache_key(features, n)}.json"
        timings, source = _read_cached(cache), "cache"
        if timings is None:
            timings, source = measure_linears(features, n), "probe"
            _write_cached(cache, features, n, timings)
        _MEASURED[key] = (timings, source)
    timings, source = _MEASURED[key]
    return decide(features, n, timings, requested=dtype, source=source)


@contextlib.contextmanager
def linear_step(native_bf16: bool):
    """Within a step whose bf16 linears take the native kernels, oneDNN is off (else torch routes bf16 there)."""
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = enabled and not native_bf16
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


@contextlib.contextmanager
def torch_threads(n: int):
    """torch runs on `n` threads inside the block, and on as many as before after it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
