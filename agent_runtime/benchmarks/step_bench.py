"""`bench step`: what one decision step costs, against the floor this machine sets for it.

The floor: a step reads every weight once (the linears, the LM head) and its views' keys and values (bytes), and
multiplies the weights by its rows (FLOPs); this machine's read bandwidth and the runtime's own matmul throughput,
both measured here, turn them into milliseconds. The measured step: the multi-stream agent's decision steps in a
short headless episode, split into the linears (timed alone at the step's rows, with the step's kernels),
attention (timed in place), the rest of the forward (embeddings, norms, RoPE, activations), command scoring and
the engine around the forward (scheduling, views, Python).
"""

import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import torch

from agent_runtime.benchmarks.measure import interleaved, progress, save_figure, subplots
from agent_runtime.control.action_grammar import CommandScorer
from agent_runtime.engine import model_runner as runner_module
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.engine.view import View
from agent_runtime.errors import UserError
from agent_runtime.model.cpu_path import detect_features
from agent_runtime.model.decoder_forward import DecoderForward
from agent_runtime.model.linear_kernels import step_kernels
from agent_runtime.session.clocks import FixedCost, measured
from agent_runtime.session.llm_episode import run_llm_episode

BANDWIDTH_BYTES = 512 * 2**20  # read once per measurement: far past any cache
THROUGHPUT_ROWS = 256  # rows at which the linears are compute-bound
REPEATS = 7


@dataclass
class StepSample:
    """One engine step as the probe saw it."""

    rows: int
    kept: int  # rows whose logits the LM head computes
    kv_tokens: int  # keys (and values) the step's views read, summed over its streams
    decision: bool  # the action stream scored commands in it
    streams: list[tuple[int, int, str]] = field(default_factory=list)  # (view tokens, new tokens, logits) a stream
    total_s: float = 0.0
    forward_s: float = 0.0
    attention_s: float = 0.0
    scoring_s: float = 0.0


@dataclass
class StepProbe:
    """Times every MultiStreamAgent.step while open: its forward, the attention inside it, and command scoring
    (the classes' methods wrapped, put back on close)."""

    samples: list[StepSample] = field(default_factory=list)
    _current: StepSample | None = None

    @contextlib.contextmanager
    def watching(self):
        originals = (MultiStreamAgent.step, runner_module.ModelRunner.forward, runner_module.view_attention,
                     CommandScorer.scores)
        MultiStreamAgent.step = self._timed_step(originals[0])
        runner_module.ModelRunner.forward = self._timed_forward(originals[1])
        runner_module.view_attention = self._timed("attention_s", originals[2])
        CommandScorer.scores = self._timed("scoring_s", originals[3])
        try:
            yield self
        finally:
            (MultiStreamAgent.step, runner_module.ModelRunner.forward, runner_module.view_attention,
             CommandScorer.scores) = originals

    def _timed_step(self, step):
        def timed(agent, now_ms):
            t0 = time.perf_counter()
            outcome = step(agent, now_ms)
            if self._current is not None:
                self._current.total_s = time.perf_counter() - t0
                self.samples.append(self._current)
            self._current = None
            return outcome
        return timed

    def _timed_forward(self, forward):
        def timed(runner, inputs):
            sample = StepSample(
                rows=sum(len(i.tokens) for i in inputs),
                kept=sum({"last": 1, "all": len(i.tokens)}.get(i.logits, 0) for i in inputs),
                kv_tokens=sum(sum(b.length for b in i.view.ordered()) + len(i.tokens) for i in inputs),
                decision=any(i.view.name.startswith("branch") for i in inputs),
                streams=[(sum(b.length for b in i.view.ordered()), len(i.tokens), i.logits) for i in inputs])
            self._current = sample
            t0 = time.perf_counter()
            result = forward(runner, inputs)
            sample.forward_s = time.perf_counter() - t0
            return result
        return timed

    def _timed(self, key: str, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            if self._current is not None:
                setattr(self._current, key, getattr(self._current, key) + time.perf_counter() - t0)
            return result
        return timed


def read_bandwidth_gb_s(repeats: int = REPEATS) -> float:
    """This machine's memory read bandwidth on torch's threads: a float32 tensor far larger than any cache, summed."""
    data = torch.ones(BANDWIDTH_BYTES // 4)
    data.sum()
    times = [measured(data.sum)[1] for _ in range(repeats)]
    return BANDWIDTH_BYTES / statistics.median(times) / 1e9


class LinearTimer:
    """The model's linears (the runner's kernels), timed alone: at a step's rows, and at many rows for the
    matmul throughput the runtime's kernels reach here."""

    def __init__(self, runner):
        self.kernels, self.dtype = runner.kernels, runner.model_dtype
        lm_head = runner.model.get_output_embeddings()
        linears = [m for m in runner.model.modules() if isinstance(m, torch.nn.Linear) and m is not lm_head]
        self.layers = runner.lean.linears(linears) if runner.lean is not None else linears  # what the forward calls
        self.lm_head = lm_head
        self.layer_params = sum(m.in_features * m.out_features for m in self.layers)
        self.head_params = lm_head.in_features * lm_head.out_features

    def seconds(self, rows: int, kept: int, repeats: int = REPEATS) -> float:
        inputs = {m.in_features: torch.randn(1, rows, m.in_features, dtype=self.dtype) for m in self.layers}
        head_input = torch.randn(1, max(kept, 1), self.lm_head.in_features, dtype=self.dtype)

        def run():
            with torch.inference_mode(), step_kernels(self.kernels, rows) if self.kernels else contextlib.nullcontext():
                for m in self.layers:
                    m(inputs[m.in_features])
                if kept:
                    self.lm_head(head_input)

        run()
        return statistics.median(measured(run)[1] for _ in range(repeats))

    def throughput_gflop_s(self) -> float:
        """FLOP/s of the layers at THROUGHPUT_ROWS rows (compute-bound there), the head left out."""
        seconds = self.seconds(THROUGHPUT_ROWS, kept=0)
        return 2.0 * THROUGHPUT_ROWS * self.layer_params / seconds / 1e9


def kernel_alternatives(timer: LinearTimer, rows: tuple[int, ...], repeats: int = REPEATS) -> dict:
    """The step's linears (head left out) on other kernels beside the runtime's, interleaved round by round, at
    each of `rows`: float32 on torch's own kernels, and int8 weights with activations quantized per step (torch's
    dynamic quantization: fbgemm, VNNI where the CPU has it). int8 changes the arithmetic, so decisions change."""
    float32 = torch.nn.Sequential(*[torch.nn.Linear(m.in_features, m.out_features, bias=False) for m in timer.layers])
    with torch.no_grad():
        for copy, m in zip(float32, timer.layers):
            copy.weight.copy_(m.weight.float())
    with warnings.catch_warnings():  # torch.ao's quantized tensors announce their deprecation
        warnings.simplefilter("ignore")
        int8 = torch.ao.quantization.quantize_dynamic(float32, {torch.nn.Linear}, dtype=torch.qint8)
    kinds = {"this_path": (timer.layers, timer.dtype), "float32": (list(float32), torch.float32),
             "int8_dynamic": (list(int8), torch.float32)}
    out = {}
    for n in rows:
        inputs = {dtype: {m.in_features: torch.randn(1, n, m.in_features, dtype=dtype) for m in timer.layers}
                  for dtype in (timer.dtype, torch.float32)}

        def run(modules, dtype, n=n, inputs=inputs):
            kernels = step_kernels(timer.kernels, n) if timer.kernels and dtype == timer.dtype else contextlib.nullcontext()
            with torch.inference_mode(), kernels:
                for m, layer in zip(modules, timer.layers):
                    m(inputs[dtype][layer.in_features])

        timings = interleaved({kind: functools.partial(run, modules, dtype) for kind, (modules, dtype) in kinds.items()},
                              repeats)
        out[str(n)] = {kind: t.median * 1e3 for kind, t in timings.items()}
        progress(f"linears at {n} row(s): " + ", ".join(f"{k} {v:.1f} ms" for k, v in out[str(n)].items()))
    return out


def forward_alternatives(runner, sample: StepSample, repeats: int = REPEATS) -> dict:
    """A decision step's forward three ways, interleaved round by round: lean (DecoderForward with stacked
    q/k/v and gate/up linears, the runtime's), lean with every linear called alone, and transformers' own
    forward; the step's streams (their new tokens and kept logits), each viewing a scratch context block as long
    as its view. The arithmetic is the same, so only the time differs."""
    store, rng = runner.store, torch.Generator().manual_seed(0)
    context = store.create("bench-context")
    scratch = View(store, own=context)
    runner.prefill(scratch, torch.randint(100, 5000, (max(n for n, _, _ in sample.streams),), generator=rng).tolist())
    scratch.close()

    def forward(lean):
        views = [View(store, [context], name=f"bench{i}") for i in range(len(sample.streams))]
        inputs = []
        for view, (_, new, logits) in zip(views, sample.streams):
            view.start_own(view.name)
            inputs.append(StreamInput(view, list(range(200, 200 + new)), logits=logits))
        kept, runner.lean = runner.lean, lean
        try:
            runner.forward(inputs)
        finally:
            runner.lean = kept
            for view in views:
                view.close()

    try:
        separate = DecoderForward(runner.model)
        timings = interleaved({"lean": functools.partial(forward, runner.lean),
                               "lean_separate_linears": functools.partial(forward, separate),
                               "transformers": functools.partial(forward, None)}, repeats)
    finally:
        store.release(context)
    out = {impl: t.median * 1e3 for impl, t in timings.items()}
    progress(f"decision forward: lean {out['lean']:.1f} ms, separate linears {out['lean_separate_linears']:.1f} ms, "
             f"transformers {out['transformers']:.1f} ms")
    return out


def floor_ms(rows: int, kept: int, kv_tokens: int, *, weight_bytes: float, kv_bytes_per_token: float,
             layer_params: int, head_params: int, bandwidth_gb_s: float, throughput_gflop_s: float) -> dict:
    """What a step of this shape can't go below: every weight and the views' KV read once, or its multiplies at
    the measured throughput, whichever takes longer."""
    read = weight_bytes + kv_tokens * kv_bytes_per_token
    flops = 2.0 * rows * layer_params + 2.0 * kept * head_params
    memory_ms, compute_ms = read / (bandwidth_gb_s * 1e9) * 1e3, flops / (throughput_gflop_s * 1e9) * 1e3
    return {"bytes_read": read, "flops": flops, "memory_ms": memory_ms, "compute_ms": compute_ms,
            "floor_ms": max(memory_ms, compute_ms)}


def _median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


def summarize(samples: list[StepSample], timer: LinearTimer, model_info: dict, machine: dict) -> dict:
    """The median decision step and the median one-row decode step, each with its breakdown and floor."""
    out = {}
    for name, chosen in (("decision", [s for s in samples if s.decision]),
                         ("decode", [s for s in samples if not s.decision and s.rows == 1])):
        if not chosen:
            continue
        rows, kept = round(_median(s.rows for s in chosen)), round(_median(s.kept for s in chosen))
        kv_tokens = round(_median(s.kv_tokens for s in chosen))
        linears_ms = timer.seconds(rows, kept) * 1e3
        total, forward = _median(s.total_s for s in chosen) * 1e3, _median(s.forward_s for s in chosen) * 1e3
        attention, scoring = _median(s.attention_s for s in chosen) * 1e3, _median(s.scoring_s for s in chosen) * 1e3
        breakdown = {"linears_ms": linears_ms, "attention_ms": attention,
                     "forward_rest_ms": max(0.0, forward - linears_ms - attention), "scoring_ms": scoring,
                     "engine_python_ms": max(0.0, total - forward - scoring)}
        floor = floor_ms(rows, kept, kv_tokens, **model_info, **machine, layer_params=timer.layer_params,
                         head_params=timer.head_params)
        out[name] = {"steps": len(chosen), "rows": rows, "kept_rows": kept, "kv_tokens": kv_tokens,
                     "step_ms": total, "forward_ms": forward, **breakdown, **floor,
                     "step_vs_floor": total / floor["floor_ms"]}
        progress(f"{name} steps: {len(chosen)}, median {total:.1f} ms ({rows} rows), floor {floor['floor_ms']:.1f} ms")
    return out


def model_info(loaded, store) -> dict:
    """The weights a step reads (every 2-D parameter once: linears, and the tied embedding as the LM head) and
    the KV bytes a view reads per token."""
    params = [p for p in loaded.model.parameters() if p.dim() == 2]
    element = params[0].element_size()
    per_token = 2 * store.k.shape[0] * store.k.shape[2] * store.k.shape[3] * store.k.element_size()
    return {"weight_bytes": float(sum(p.numel() for p in params) * element), "kv_bytes_per_token": float(per_token)}


def plot_steps(paths: list[dict], path, title: str) -> None:
    """Per CPU path: the measured decision step, stacked by part, beside its floor."""
    parts = (("linears_ms", "linears"), ("attention_ms", "attention"), ("forward_rest_ms", "rest of the forward"),
             ("scoring_ms", "command scoring"), ("engine_python_ms", "engine and Python"))
    fig, ax = subplots(figsize=(7, 2.2 + 1.1 * len(paths)), dpi=120)
    labels, widest = [], 0.0
    for i, result in enumerate(paths):
        step = result["decision"]
        left = 0.0
        for j, (key, label) in enumerate(parts):
            ax.barh(2 * i + 1, step[key], left=left, color=f"C{j}", label=label if i == 0 else None)
            left += step[key]
        ax.barh(2 * i, step["floor_ms"], color="grey", alpha=0.6, label="floor" if i == 0 else None)
        ax.annotate(f"{step['step_vs_floor']:.1f}x the floor", (left, 2 * i + 1), xytext=(4, -3),
                    textcoords="offset points", fontsize=8)
        widest = max(widest, left)
        labels += [f"{result['cpu_path']}: floor", f"{result['cpu_path']}: measured"]
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set(xlabel="ms per decision step", xlim=(0, widest * 1.25))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    save_figure(fig, path)


def measure_step(args, loaded, open_runtime) -> dict:
    """This process's CPU path: the machine's bandwidth and throughput, then the steps of one headless episode
    (seed --seed, --max-tics tics, the fixed-cost clock so the world moves the same on every machine)."""
    machine = {"bandwidth_gb_s": read_bandwidth_gb_s()}
    progress(f"read bandwidth {machine['bandwidth_gb_s']:.1f} GB/s")
    with open_runtime(args.seed) as runtime:
        timer = LinearTimer(runtime.runner)
        machine["throughput_gflop_s"] = timer.throughput_gflop_s()
        progress(f"matmul throughput {machine['throughput_gflop_s']:.0f} GFLOP/s")
        probe = StepProbe()
        with probe.watching():
            run_llm_episode(runtime.env, runtime, seed=args.seed, fixed_cost=FixedCost(), max_tics=args.max_tics)
        progress(f"{len(probe.samples)} steps played")
        result = summarize(probe.samples, timer, model_info(loaded, runtime.store), machine)
        if "decision" not in result:
            raise UserError(f"no decision step in {args.max_tics} tics: raise --max-tics")
        result["kernels"] = kernel_alternatives(timer, tuple(dict.fromkeys((1, result["decision"]["rows"]))))
        if runtime.runner.lean is not None:
            decisions = sorted((s for s in probe.samples if s.decision), key=lambda s: s.rows)
            result["forwards"] = forward_alternatives(runtime.runner, decisions[len(decisions) // 2])
    return {**machine, **result, "cpu_path": loaded.cpu.name, "dtype": loaded.cpu.dtype}


def other_cpu_paths(args) -> list[dict]:
    """The same bench in a process of its own for each path this CPU can be forced to besides its own (torch's and
    oneDNN's kernels are chosen when they load, so a path needs its own process): AVX2 on an AVX-512 CPU."""
    if detect_features().isa != "AVX512":
        return []
    env = {**os.environ, "DOOM_AGENT_CPU": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "agent_runtime.cli", "bench", "step", "--json", "-q", "--out", out,
                   "--max-tics", str(args.max_tics), "--seed", str(args.seed), "--scenario", args.scenario,
                   *(["--config", args.config] if args.config else []), *(["--model", args.model] if args.model else []),
                   *(["--threads", str(args.threads)] if args.threads else [])]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        progress(f"the forced AVX2 path failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
        return []
    progress("forced AVX2 path measured")
    return [json.loads(done.stdout)]
