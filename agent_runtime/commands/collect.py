"""`agent-runtime collect`: DAgger data. The multi-stream agent plays as it is, the lag-aware expert labels each
decision, and the view tokens and both commands go to an append-only data set. Run it again on the same --out to
resume: a run killed mid-episode loses only that episode; finished ones are never touched.
"""

from __future__ import annotations

import argparse
import time

from agent_runtime import fanout
from agent_runtime.commands import add_options, at_least, check_scenario, fixed_cost, writable_dir
from agent_runtime.errors import UserError
from agent_runtime.fanout.collect_fanout import run_collect
from agent_runtime.notices import stderr_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, "--scenario")
    p.add_argument("--episodes", type=int, required=True, help="episodes the data set should hold in all")
    p.add_argument("--out", required=True, help="data set directory (created, or resumed when it exists)")
    add_options(p, "--seed", "--model")
    p.add_argument("--adapter", help="LoRA adapter the agent plays with (DAgger: the newest one; default: the config's "
                                     "model.adapter, the one shipped for --scenario; `none`: the untrained model)")
    p.add_argument("--expert-acts", type=float, default=0.0, metavar="P",
                   help="DAgger's mix: each decision executes the expert's command instead of the model's with "
                        "probability P (default 0: the model plays; 1: the expert plays, the model's view is recorded)")
    add_options(p, "--max-tics", "--config", "--threads", "--fixed-cost")
    p.add_argument("--labeller", choices=("view", "full"), default="view",
                   help="who labels: view (default), the expert restricted to what the action view holds, whose labels "
                        "a model can learn; full, the privileged expert of `episode --policy expert`")
    fanout.add_arguments(p)  # --workers, --ray-address


def open_runtime(args, threads: int | None, *, announce: bool = True):
    """The runtime collect plays on and the data set's manifest for it: here, or on a Ray worker (`threads`: the
    CPUs Ray reserved for it)."""
    from agent_runtime.config import load_config
    from agent_runtime.session.runtime import Runtime

    config = load_config(args.config, scenario=args.scenario, seed=args.seed)
    runtime = Runtime.open(config, model=args.model, threads=threads, adapter=args.adapter, env_seed=args.seed,
                           announce=announce)
    loaded = runtime.loaded
    return runtime, {
        "scenario": args.scenario, "buttons": list(runtime.env.buttons), "model_id": loaded.model_id,
        "model_weight_hash": loaded.base_weight_hash,  # what `train` puts adapters on
        "adapter": loaded.adapter.hash if loaded.adapter else None,
        "expert": "expert" if args.labeller == "full" else "view_expert", "expert_acts": args.expert_acts,
        "seed": args.seed, "max_tics": args.max_tics,
        "clock": "fixed_cost" if args.fixed_cost else "compute", "cpu_path": loaded.cpu.summary(),
        "config": config.model_dump(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run(args: argparse.Namespace) -> int:
    from agent_runtime.training.decision_log import DecisionLog

    at_least(args, 1, "--episodes", "--max-tics")
    if not 0.0 <= args.expert_acts <= 1.0:
        raise UserError(f"--expert-acts must be a probability between 0 and 1 (got {args.expert_acts})")
    fanout.check(args)
    check_scenario(args.scenario)
    out = writable_dir(args.out, "--out")
    if fanout.wanted(args):  # Ray workers play and label; this process writes the data set in episode order
        return run_collect(args, out)
    runtime, manifest = open_runtime(args, args.threads)  # (its grammar refused a scenario with delta buttons)
    with runtime:
        runtime.time_bounds(fixed_cost(args), announce=True)  # the fence the data plays under
        log = DecisionLog(out, manifest)
        try:
            if log.next_episode:
                stderr_line(f"resuming {out}: {log.next_episode} episode(s) already collected")
            for index in range(log.next_episode, args.episodes):
                t0 = time.monotonic()
                summary = collect_episode(runtime, log, index, args)
                log.finish_episode(summary)
                stderr_line(f"[{index + 1}/{args.episodes}] {episode_line(summary)}, {time.monotonic() - t0:.1f} s")
        finally:
            log.close()
    print_totals(out, log.episodes)
    return 0


def collect_episode(runtime, log, index: int, args) -> dict:
    """Play episode `index`, its decisions labelled into `log` (anything with add(decision)); returns its summary."""
    from agent_runtime.session.events import EventBus
    from agent_runtime.session.llm_episode import run_llm_episode
    from agent_runtime.training.expert_labeler import ExpertLabeler

    env, seed = runtime.env, args.seed + index
    labeler = ExpertLabeler(env.buttons, log, screen_width=env.resolution[1], words=runtime.grammar.words,
                            expert_acts=args.expert_acts, expert=args.labeller,
                            aimed=runtime.config.engine.frame_line == "aimed")
    labeler.start_episode(index, seed)
    bus = EventBus("collect", keep=False)
    bus.sinks.append(labeler)  # executed commands: the expert's commands in flight
    result = run_llm_episode(env, runtime, seed=seed, agent_seed=seed, max_tics=args.max_tics,
                             fixed_cost=fixed_cost(args), bus=bus, on_decision=labeler.on_decision)
    return {"episode": index, "seed": seed, "decisions": labeler.decisions,
            "agreement": labeler.agreed / labeler.decisions if labeler.decisions else None,
            "expert_acted": labeler.expert_acted,
            "kills": result["kills"], "reward": result["reward"], "tics": result["tics"],
            "actions_executed": result["actions_executed"], "actions_fenced": result["actions_fenced"]}


def episode_line(summary: dict) -> str:
    """An episode's progress line, here and on Ray."""
    agreement = "n/a" if summary["agreement"] is None else f"{summary['agreement']:.0%}"
    return (f"{summary['decisions']} decisions, model agrees with the expert on {agreement}, {summary['kills']} "
            f"kills, {summary['tics']} tics")


def print_totals(out, episodes: list[dict]) -> None:
    """The closing line, here and on Ray: what the data set holds now, resumed episodes included."""
    print(f"{out}: {len(episodes)} episode(s), {sum(e['decisions'] for e in episodes)} decisions", flush=True)
