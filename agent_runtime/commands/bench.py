"""`agent-runtime bench ...`: benchmarks that print ratios measured side by side in one run."""

import argparse
import json

from agent_runtime import fanout, signals
from agent_runtime.commands import (MODEL_OPTIONS, OPTIONS, VERBOSITY, add_options, agent_name, at_least,
                                    output_file, require_cuda, writable_dir)
from agent_runtime.errors import UserError
from agent_runtime.fanout.outcome import Task

PLAY_AGENTS = ("llm", "llm_untrained", "sequential", "no_think", "scripted", "expert", "view_expert",
               "view_expert_noted", "random")  # episode's policies
REALTIME_CLOCK = "realtime (ASYNC_PLAYER, device-free audio in real time)"
WITH_SCENARIO = ("--scenario", "--seed", "--config")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    kv = _bench(sub, "kv", _run_kv, "KV blocks and views: view vs contiguous, drop vs recompute, N streams vs 1, "
                "image blocks (a vision-language model's frames)", "kv.json and kv_streams.png", "--config",
                "--model", "--dtype", "--threads", "--device")
    kv.add_argument("--repeats", type=int, default=15, help="timed repeats per measurement (default 15)")
    kv.add_argument("--image-models", default=None, help=(
        "comma-separated vision-language models for the image rows: tiny:smolvlm, tiny:llava, smolvlm-256m-shapes "
        "(SmolVLM-256M's shapes, random weights) or a local model directory (default: those three; none: no image "
        "rows)"))
    st = _bench(sub, "step", _run_step, "one decision step against this machine's floor for it (weights and KV read "
                "at the measured bandwidth, multiplies at the measured throughput), with its breakdown",
                "step.json and step.png", *WITH_SCENARIO, *MODEL_OPTIONS[:-1])  # CPU paths: no --device
    st.add_argument("--max-tics", type=int, default=300, help="tics of the episode whose steps are timed (default 300)")
    st.add_argument("--cpu-paths", choices=("this", "all"), default="this", help=(
        "this: the CPU path this machine chose; all: also every path it can be forced to (AVX2 on an AVX-512 CPU), "
        "each in a process of its own"))
    _episodes_bench(sub, "reaction", _run_reaction,
                    "reaction latency: multi-stream (llm) vs sequential vs no-think, same model and seeds",
                    "reaction.json and reaction_cdf.png")
    vo = _bench(sub, "voice", _run_voice, "synthesized voice commands during real-time play: end of speech -> action",
                None, *WITH_SCENARIO, "--barge-in", "--command-pause-ms", *MODEL_OPTIONS)
    vo.add_argument("--commands", type=int, default=10, help="voice commands to speak (default 10)")
    pl = _episodes_bench(sub, "play", _run_play,
                         "play quality: kills, reward and survival of every agent on the same seeds",
                         "play.json and play_kills.png")
    pl.add_argument("--agents", help="comma-separated subset of: " + ", ".join(PLAY_AGENTS) + " (default all; "
                                     "multi_stream, multi_stream_untrained: old names of llm, llm_untrained)")
    pl.add_argument("--frame-sources", metavar="LIST", help=(
        "comma-separated frame sources, e.g. labels,pixels: the model agents also play on each after the first "
        "(llm_pixels, ...), in the same run; the first is the plain names' (default: --frame-source's)"))
    pl.add_argument("--lag-tics", metavar="LIST", help=(
        "comma-separated lags in tics (28.6 ms each), e.g. 0,2,4,8: every agent also plays seeing the game that "
        "late (llm_lag4, ...): kills against lag, in the JSON's lag_curve and lag_curve.png"))
    wo = _bench(sub, "words", _run_words, "claims in the Thinker's notes and in remarks that are true of the game when "
                "written, beside the planner's and the describer's", "words.json and words.png", *WITH_SCENARIO,
                "--max-tics", "--fixed-cost", *MODEL_OPTIONS)
    wo.add_argument("--episodes", type=int, default=3, help="episodes to play and judge (default 3)")
    mem = _bench(sub, "memory", _run_memory, "long headless run: KV pool and process memory must stay flat",
                 "memory.json and memory.png", "--scenario", "--config", "--fixed-cost", "--model", "--dtype",
                 "--threads", "--device")
    mem.add_argument("--frames", type=int, default=10000, help="frames to prefill in all (default 10000)")
    it = _bench(sub, "interrupt", _run_interrupt, "barge-in in real time on the device-free audio backend: "
                "interruption -> silence", "interrupt.json", "--config")
    it.add_argument("--barge-ins", type=int, default=20, help="barge-ins to inject (default 20)")
    it.add_argument("--barge-in", "--mode", **OPTIONS["--barge-in"])  # --mode: its old name
    it.add_argument("--seed", type=int, help="seed for phrase choice and injection moments (default: the config's)")
    sk = _bench(sub, "soak", _run_soak, "long real-time live session with scripted voice commands and barge-ins: "
                "RSS and KV growth, event sequence gaps, latency drift", "soak.json and soak.png", *WITH_SCENARIO,
                *MODEL_OPTIONS, json_option=False)
    sk.add_argument("--minutes", type=float, default=30.0, help="minutes of real-time play (default 30)")
    sk.add_argument("--every", type=float, default=4.0,
                    help="quiet seconds after each scripted voice phrase before the next barge-in (default 4)")
    add_options(sk, "--barge-in")
    sk.add_argument("--json", nargs="?", const="-", metavar="PATH",
                    help="also write the result as JSON to PATH (no PATH: print it as one JSON object on stdout)")


def _bench(sub, name: str, runner, help_text: str, files: str | None, *options: str, json_option: bool = True):
    """A bench's parser with what benches share: --out when it writes `files`, --json, the shared `options`."""
    p = sub.add_parser(name, help=help_text, parents=[VERBOSITY], description=f"bench {name}: {help_text}."
                       + (f" Writes {files} to --out." if files else ""))
    p.set_defaults(_bench_run=runner)
    if files:
        p.add_argument("--out", default="bench-out", help=f"directory for {files} (default bench-out)")
    add_options(p, *options, *(("--json",) if json_option else ()))
    return p


def _episodes_bench(sub, name: str, runner, help_text: str, files: str):
    """reaction and play: every agent plays the same seeded episodes, here or on Ray workers."""
    p = _bench(sub, name, runner, help_text, files, *WITH_SCENARIO, "--max-tics", "--fixed-cost", "--frame-source",
               *MODEL_OPTIONS, "--no-think-adapter")
    p.add_argument("--episodes", type=int, default=5, help="episodes per agent (default 5)")
    p.add_argument("--think-tokens", type=int, default=64,
                   help="sequential agent's thought tokens per cycle (default 64)")
    fanout.add_arguments(p)  # --workers, --ray-address
    return p


def _open_runtime(args, loaded, *, env_seed: int, clock: str | None = None):
    """The runtime a bench plays on, its env opened on --scenario (clock None: the headless sync one)."""
    from agent_runtime.config import from_args
    from agent_runtime.session.runtime import Runtime

    return Runtime.open(from_args(args, clock=clock), loaded=loaded, scenario=args.scenario, env_seed=env_seed,
                        clock=clock or "sync", device=args.device)


def _stamp(result: dict, info: dict, args=None, loaded=None) -> dict:
    """What every result carries: the machine; and where a model plays a scenario, the scenario and the adapter."""
    result.update(machine=info, cpu_path=info.get("cpu_path"))
    if loaded is not None:
        result.update(scenario=args.scenario, adapter=loaded.adapter.hash if loaded.adapter else None)
    return result


def _output(args, result: dict, report, *json_paths) -> int:
    """Write the result to each of `json_paths` (None skipped), then print it as one JSON object (--json) or as
    `report()` has it."""
    for path in filter(None, json_paths):
        path.write_text(json.dumps(result, indent=2, default=str))
    if args.json in (True, "-"):  # soak's --json PATH: the file above, and the report
        print(json.dumps(result, default=str))
    else:
        report()
    return 0


def _run_kv(args) -> int:
    from agent_runtime.benchmarks.image_block_bench import IMAGE_MODELS, image_row
    from agent_runtime.benchmarks.kv_bench import KVBench, plot_streams
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model

    at_least(args, 3, "--repeats")
    out = writable_dir(args.out, "--out")
    loaded, info = load_bench_model(args, clock="wall", device=args.device)
    loaded.model.to(args.device)
    backend = "triton" if args.device == "cuda" else "torch"
    bench = KVBench(loaded, repeats=args.repeats, device=args.device, backend=backend)
    image_models = ([] if args.image_models == "none" else args.image_models.split(",") if args.image_models
                    else list(IMAGE_MODELS))
    with bench_bar(bench.steps + len(image_models), "kv", "step"):
        result = _stamp(bench.run(), info)
        result["image_blocks"] = [image_row(spec.strip(), dtype=loaded.cpu.dtype, device=args.device,
                                            repeats=max(3, args.repeats // 3), timer=bench.timer)
                                  for spec in image_models]
    plot_streams(result, out / "kv_streams.png", f"{loaded.model_id}, {info['threads']} thread(s), {args.device}")
    result["plot"] = str(out / "kv_streams.png")
    return _output(args, result, lambda: _print_kv(result), out / "kv.json")


def _run_step(args) -> int:
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model
    from agent_runtime.benchmarks.step_bench import measure_step, other_cpu_paths, plot_steps

    from agent_runtime.config import from_args

    at_least(args, 30, "--max-tics")
    args.device = "cpu"
    args.seed = from_args(args).seed if args.seed is None else args.seed
    out = writable_dir(args.out, "--out")
    loaded, info = load_bench_model(args, clock="fixed_cost (the world); each step's wall time measured")
    with bench_bar(7, "step", "part"):
        result = _stamp(measure_step(args, loaded, lambda seed: _open_runtime(args, loaded, env_seed=seed)), info)
    paths = [result] + (other_cpu_paths(args) if args.cpu_paths == "all" else [])
    full = {**result, "paths": paths[1:]} if len(paths) > 1 else result
    plot_steps(paths, out / "step.png", f"{loaded.model_id}, {info['threads']} thread(s), decision steps")
    full["plot"] = str(out / "step.png")
    return _output(args, full, lambda: _print_step(paths, full["plot"]), out / "step.json")


def _print_step(paths: list[dict], plot: str) -> None:
    for result in paths:
        print(f"cpu path {result['cpu_path']}: read bandwidth {result['bandwidth_gb_s']:.1f} GB/s, matmul "
              f"{result['throughput_gflop_s']:.0f} GFLOP/s (the runtime's linears at 256 rows)")
        for name, step in ((k, result[k]) for k in ("decision", "decode") if k in result):
            print(f"  {name} step ({step['rows']} rows, {step['kept_rows']} with logits, {step['kv_tokens']} KV "
                  f"tokens read): {step['step_ms']:.1f} ms; floor {step['floor_ms']:.1f} ms ({step['bytes_read'] / 1e6:.0f}"
                  f" MB read: {step['memory_ms']:.1f} ms; {step['flops'] / 1e9:.1f} GFLOP: {step['compute_ms']:.1f} ms)"
                  f" -> {step['step_vs_floor']:.1f}x the floor")
            print(f"    linears {step['linears_ms']:.1f} ms, attention {step['attention_ms']:.1f} ms, rest of the "
                  f"forward {step['forward_rest_ms']:.1f} ms, command scoring {step['scoring_ms']:.1f} ms, engine and "
                  f"Python {step['engine_python_ms']:.1f} ms")
        for rows, ms in result.get("kernels", {}).items():
            base = ms["this_path"]
            print(f"  the linears alone at {rows} row(s), other kernels side by side: this path {base:.1f} ms, "
                  f"float32 {ms['float32']:.1f} ms ({ms['float32'] / base:.2f}x), int8 weights {ms['int8_dynamic']:.1f}"
                  f" ms ({ms['int8_dynamic'] / base:.2f}x; different arithmetic, so different decisions)")
        if "forwards" in result:
            ms = result["forwards"]
            print(f"  a decision's forward, side by side: lean {ms['lean']:.1f} ms, lean with each linear alone "
                  f"{ms['lean_separate_linears']:.1f} ms ({ms['lean'] / ms['lean_separate_linears']:.2f}x), transformers' "
                  f"own forward {ms['transformers']:.1f} ms ({ms['lean'] / ms['transformers']:.2f}x; the same arithmetic)")
    print(f"plot: {plot}")


def _print_kv(result: dict) -> None:
    print(f"(a) view of 8 blocks vs contiguous (transformers cache): {result['view_vs_contiguous']:.3f}x step time "
          f"({result['view8_step_ms']:.1f} vs {result['contiguous_step_ms']:.1f} ms; "
          f"vs 1 block {result['view8_vs_view1']:.3f}x)")
    print(f"(b) drop a middle block vs recompute {result['suffix_tokens']} tokens: "
          f"{result['drop_vs_recompute']:.0f}x cheaper ({result['drop_us']:.1f} us vs {result['recompute_ms']:.0f} ms)")
    for n in (2, 4, 8):
        print(f"(c) {n} streams vs 1: {result[f'streams{n}_vs_1']:.2f}x aggregate tokens/s "
              f"({result[f'tokens_per_s_{n}']:.1f} vs {result['tokens_per_s_1']:.1f})")
    print(f"(c) bound: the linear layers alone cost {result['linears4_vs_1']:.2f}x on 4 rows vs 1 "
          f"({result['linears_ms_4']:.1f} vs {result['linears_ms_1']:.1f} ms), so 4 streams gain at most "
          f"{result['streams4_bound']:.2f}x")
    for row in result["image_blocks"]:
        print(f"(e) image blocks, {row['model']}: {row['tokens_per_frame']} tokens a frame; vision tower "
              f"{row['encode_ms']:.1f} ms a frame ({row['encode_ms_per_frame_batch4']:.1f} ms a frame in a batch of 4), "
              f"prefill {row['prefill_ms']:.1f} ms: {row['frames_per_s']:.1f} frames/s")
    print(f"plot: {result['plot']}")


def _play_episodes(args, job, figure: str, plot, table) -> int:
    """bench reaction and play: episode i of every agent on seed + i, agents taking turns episode by episode, played
    by Ray workers or here on one loaded model (`job`: PlayBenchJob); `plot` draws `figure`, the result goes to
    BENCH.json without the agents' raw "_samples" (a CDF's input, too long to read) and `table` shows it. Exit 1
    when Ray lost a pair."""
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model

    fanout.check(args)
    out = writable_dir(args.out, "--out")
    tasks = [Task((i, name), None, f"episode {i} {name}") for i in range(args.episodes) for name in job.agents]
    results: dict[tuple[int, str], dict] = {}

    def on_result(task: Task, result: dict, where: str = "") -> None:
        results[task.key] = result
        job.report(task, result, where)

    workers = f"{args.workers} Ray workers" if fanout.wanted(args) else ""
    with bench_bar(len(tasks), args.bench, "episode"):  # each job.report moves it
        if workers:
            added = _on_ray(args, job, tasks, on_result)
        else:
            loaded, machine = load_bench_model(args, device=args.device)
            try:
                job.build(loaded)
                for task in tasks:
                    on_result(task, job.play(task))
            finally:
                if job.env is not None:
                    job.env.close()
            added = _stamp({}, machine, args, loaded)
    per_agent = {name: [results[(i, name)] for i in range(args.episodes) if (i, name) in results]
                 for name in job.agents}
    result = {**job.summarize(per_agent), **added, "frame_source": args.frame_source}
    plot(result, out / figure, job.title(added["machine"], added["adapter"], workers))
    public = json.loads(json.dumps({**result, "plot": str(out / figure)}, default=str))
    for summary in public["agents"].values():
        summary.pop("_samples", None)
    _output(args, public, lambda: table(public), out / f"{args.bench}.json")
    return 1 if result.get("lost") else 0


def _on_ray(args, job, tasks: list[Task], on_result) -> dict:
    """`tasks` played by Ray workers that each hold a `job`: the serial summary on the same seeds (for reaction with
    --fixed-cost; without it each worker measures its own steps on the cores Ray reserved for it). Returns what the
    result adds to the serial one; prints the machine header (the workers' machine, the cluster)."""
    from agent_runtime.benchmarks.measure import print_header
    from agent_runtime.fanout.worker_pool import run_on_ray

    if args.device != "cpu":
        raise UserError("--workers/--ray-address run on CPU workers; use --device cpu (or drop --workers)")
    lost, info, described = run_on_ray(args, job, tasks, lambda task, outcome, worker: on_result(
        task, outcome.result, f" ({worker.name()})"), command=job.command)
    machine = {**info.get("_machine", {}), "workers": args.workers, "ray": described}
    print_header(machine)
    return dict(machine=machine, cpu_path=machine.get("cpu_path"), scenario=args.scenario,
                adapter=info.get("adapter"), workers=args.workers, lost=[task.label for task, _ in lost])


def _run_reaction(args) -> int:
    from agent_runtime.benchmarks.reaction_bench import AGENTS, ReactionBenchJob, plot_cdf

    at_least(args, 1, "--episodes", "--think-tokens")
    return _play_episodes(args, ReactionBenchJob(args, AGENTS), "reaction_cdf.png", plot_cdf, _print_reaction_table)


def _print_reaction_table(result: dict) -> None:
    from agent_runtime.benchmarks.measure import shown as f

    cols = ("reaction_ms_p50", "reaction_ms_p95", "reaction_ms_p99", "time_to_first_action_ms", "actions_executed",
            "actions_fenced", "frames_dropped", "kills", "thinker_tokens_per_s", "actions_per_s")
    print("agent          "
          + "  ".join(c.replace("reaction_ms_", "react_").replace("_ms", "")[:14].rjust(14) for c in cols))
    for name, s in result["agents"].items():
        exact = [not isinstance(s[c], float) or c.startswith(("react", "time")) for c in cols]
        print(f"{name:14s} " + "  ".join((f(s[c]) if e else f"{s[c]:.2f}").rjust(14) for c, e in zip(cols, exact)))
    r = result["ratios"]
    print(f"sequential / multi-stream reaction: p50 {f(r['reaction_p50_seq_over_multi'])}x, "
          f"p95 {f(r['reaction_p95_seq_over_multi'])}x; "
          f"no-think / multi-stream p50 {f(r['reaction_p50_nothink_over_multi'])}x")
    print(f"frame lines ({result['frame_source']}): {f(result['frame_encode_ms_p50'], ' ms', '.2f')} p50, "
          f"{f(result['frame_encode_ms_p95'], ' ms', '.2f')} p95 each, charged to the step")
    print(f"plot: {result['plot']}")


def _run_memory(args) -> int:
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model
    from agent_runtime.benchmarks.memory_soak import plot_memory, run_memory_soak
    from agent_runtime.session.episodes import fixed_cost

    at_least(args, 10, "--frames")
    out = writable_dir(args.out, "--out")
    loaded, info = load_bench_model(args, clock="fixed_cost" if args.fixed_cost else "compute", device=args.device)
    with _open_runtime(args, loaded, env_seed=0) as runtime, bench_bar(args.frames, "memory", "frame"):
        result = run_memory_soak(runtime.env, runtime, frames=args.frames, fixed_cost=fixed_cost(args))
    plot_memory(result.pop("_samples"), out / "memory.png",
                f"{result['frames']} frames, {loaded.model_id}, {args.scenario}")
    _stamp(result, info)
    return _output(args, result, lambda: print(
        f"{result['frames']} frames over {result['episodes']} episodes: KV pool peak {result['pool_peak_pages']}"
        f"/{result['pool_capacity_pages']} pages, blocks peak {result['blocks_peak']}, "
        f"RSS {result['rss_mb_early']:.0f} MB early -> {result['rss_mb_late']:.0f} MB late "
        f"({result['rss_growth_mb']:+.1f} MB); plot {out / 'memory.png'}"), out / "memory.json")


def _run_interrupt(args) -> int:
    from agent_runtime.benchmarks.interrupt_bench import print_report, run_interrupt_bench
    from agent_runtime.benchmarks.measure import bench_bar, machine_info, print_header

    at_least(args, 1, "--barge-ins")
    out = writable_dir(args.out, "--out")
    info = machine_info("none (audio only)", 1, clock="real time (device-free audio backend)", device="cpu")
    info["audio"] = "speaker 1024 frames @ 22050 Hz, mic 512 samples @ 16 kHz, espeak-ng + silero + pocketsphinx"
    print_header(info)
    with bench_bar(args.barge_ins, "interrupt", "barge-in"):
        result = _stamp(run_interrupt_bench(args.barge_ins, mode=args.barge_in, seed=args.seed), info)
    return _output(args, result, lambda: (print_report(result), print(f"written: {out / 'interrupt.json'}")),
                   out / "interrupt.json")


def _run_voice(args) -> int:
    from agent_runtime.benchmarks.measure import load_bench_model, shown
    from agent_runtime.benchmarks.voice_bench import run_voice_bench

    at_least(args, 1, "--commands")
    # the free cores, as in live: the real-time game and audio take well under half a core
    loaded, info = load_bench_model(args, clock=REALTIME_CLOCK, device=args.device)
    with _open_runtime(args, loaded, env_seed=args.seed, clock="realtime") as runtime:
        result = run_voice_bench(runtime.env, runtime, commands=args.commands, seed=args.seed, mode=args.barge_in,
                                 command_pause_ms=runtime.config.voice.command_pause_ms)
    _stamp(result, info)
    ms = {k: [shown(result[f"speech_{k}_to_action_ms_{q}"], " ms") for q in ("p50", "p95", "max")]
          for k in ("end", "onset")}
    return _output(args, result, lambda: print(
        f"recognition {result['recognized_correctly']}/{result['commands']}; action executed after the end of "
        f"speech: p50 {ms['end'][0]}, p95 {ms['end'][1]}, max {ms['end'][2]}; after its onset: p50 {ms['onset'][0]}, "
        f"p95 {ms['onset'][1]}, max {ms['onset'][2]}"))


def _run_soak(args) -> int:
    if not args.minutes > 0:  # before anything loads
        raise UserError(f"--minutes must be positive (got {args.minutes:g})")
    if not args.every >= 1:
        raise UserError(f"--every must be at least 1 second (got {args.every:g})")
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model
    from agent_runtime.benchmarks.soak_bench import plot_soak, print_report, run_soak

    out = writable_dir(args.out, "--out")
    json_path = output_file(args.json, "--json") if args.json not in (None, "-") else None
    loaded, info = load_bench_model(args, clock=REALTIME_CLOCK, device=args.device)
    title = f"soak: {args.scenario}, {loaded.model_id}, {args.minutes:g} min, barge-in {args.barge_in}"
    try:
        with _open_runtime(args, loaded, env_seed=args.seed, clock="realtime") as runtime, \
                bench_bar(args.minutes * 60.0, "soak", "s"):
            result = run_soak(runtime.env, runtime, seconds=args.minutes * 60.0, seed=args.seed, mode=args.barge_in,
                              every_s=args.every)
    except signals.Interrupted as e:  # keep what was measured: the JSON only (a plot would delay the exit)
        if hasattr(e, "soak_result"):
            partial = _stamp(e.soak_result, info, args, loaded)
            (out / "soak.json").write_text(json.dumps(partial, indent=2, default=str))
            e.args = (f"{e} after {partial['seconds']:.0f} s; partial results in {out / 'soak.json'}",)
        raise  # the CLI's one line says it, with the reason: exit 130/143
    _stamp(result, info, args, loaded)["plot"] = str(out / "soak.png")
    plot_soak(result, out / "soak.png", title)
    return _output(args, result, lambda: (print_report(result), print(
        f"written: {out / 'soak.json'}, {result['plot']}" + (f", {json_path}" if json_path else ""))),
        out / "soak.json", json_path)


def _run_words(args) -> int:
    from agent_runtime.benchmarks.measure import bench_bar, load_bench_model, progress
    from agent_runtime.benchmarks.words_bench import SOURCES, plot_words, run_words_bench
    from agent_runtime.config import from_args
    from agent_runtime.session.episodes import fixed_cost
    from agent_runtime.session.runtime import Runtime
    from envs.doom_env import DoomEnv

    at_least(args, 1, "--episodes")
    out = writable_dir(args.out, "--out")
    loaded, info = load_bench_model(args, device=args.device)
    config = from_args(args)
    # the judge reads the label buffer and every object's position, whatever the agent reads
    with DoomEnv(args.scenario, resolution=config.resolution, seed=args.seed, labels=True,
                 privileged_objects=True) as env, bench_bar(args.episodes, "words", "episode"):
        runtime = Runtime.open(config, loaded=loaded, env=env, device=args.device)
        result = run_words_bench(env, runtime, episodes=args.episodes, seed=args.seed, max_tics=args.max_tics,
                                 fixed_cost=fixed_cost(args), progress=progress)
    _stamp(result, info, args, loaded)["plot"] = str(out / "words.png")
    plot_words(result, out / "words.png", f"words: {args.scenario}, {loaded.model_id}")

    def report() -> None:
        for name in SOURCES:
            s = result["sources"][name]
            share = "n/a" if s["true_fraction"] is None else f"{s['true_fraction']:.0%}"
            print(f"{name:10s} {s['texts']:4d} texts, {s['claims']:4d} claims, {share:>4s} true "
                  f"({s['undecided']} undecided, {s['no_claim_phrases']} phrases claiming nothing)")
        print(f"notes per minute {result['notes_per_minute'] or 0:.1f}; decisions with a note in view "
              f"{result['decisions_with_note']}/{result['decisions']}; plot {result['plot']}")

    return _output(args, result, report, out / "words.json")


def _play_agents(text: str | None) -> tuple[str, ...]:
    if not text:
        return PLAY_AGENTS
    agents = tuple(agent_name(a.strip()) for a in text.split(",") if a.strip())
    unknown = [a for a in agents if a not in PLAY_AGENTS]
    if unknown or not agents:
        raise UserError(f"--agents: unknown agent(s) {', '.join(unknown) or '(none given)'}; "
                        f"use {', '.join(PLAY_AGENTS)}")
    return agents


def _run_play(args) -> int:
    from agent_runtime.benchmarks.play_bench import PlayBenchJob, plot_kills

    from agent_runtime.benchmarks.play_bench import variant_names

    at_least(args, 1, "--episodes")
    sources = _listed(args.frame_sources, "--frame-sources", str, allowed=("labels", "pixels"))
    lags = _listed(args.lag_tics, "--lag-tics", int, allowed=range(0, 36))
    if sources:
        args.frame_source = sources[0]
    job = PlayBenchJob(args, variant_names(_play_agents(args.agents), tuple(lags), tuple(sources)))
    return _play_episodes(args, job, "play_kills.png", plot_kills, _print_play_table)


def _listed(text: str | None, flag: str, kind, allowed) -> list:
    """A comma-separated option's values, each of `kind` and in `allowed`; [] when not given."""
    if text is None:
        return []
    try:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v not in allowed for v in values):
        raise UserError(f"{flag} {text!r}: give a comma-separated list of "
                        + (", ".join(allowed) if isinstance(allowed, tuple) else f"{allowed.start}..{allowed.stop - 1}"))
    return values


def _print_play_table(result: dict) -> None:
    from agent_runtime.benchmarks.measure import shown

    print(f"{'agent':24s} {'kills':>14s} {'reward':>14s} {'tics':>16s} {'reaction p50':>13s}")
    for name, s in result["agents"].items():
        p50 = shown(s["reaction_ms_p50"], " ms", ".1f")
        print(f"{name:24s} {s['kills_mean']:6.1f} ± {s['kills_std']:5.1f} {s['reward_mean']:6.1f} ± "
              f"{s['reward_std']:5.1f} {s['tics_mean']:7.0f} ± {s['tics_std']:6.0f} {p50:>13s}")
    print(f"mean ± sample std (n - 1) over {result['episodes']} episode(s) per agent; plot: {result['plot']}")
    for agent, points in result.get("lag_curve", {}).items():
        print(f"{agent} kills against lag: " + ", ".join(f"{p['lag_ms']:.0f} ms {p['kills_mean']:.1f}" for p in points)
              + f"; plot: {result['lag_curve_plot']}")


def run(args: argparse.Namespace) -> int:
    from agent_runtime.config import from_args

    from_args(args)  # the flags left unset take the config's values (the model section's too)
    require_cuda(getattr(args, "device", "cpu"))
    return args._bench_run(args)
