"""DAgger collection, here or on a Ray worker: the multi-stream agent plays as it is and the lag-aware expert labels
each decision into a data set (`agent-runtime collect`)."""

import json
import time

from agent_runtime.config import from_args
from agent_runtime.session.episodes import fixed_cost
from agent_runtime.session.events import EventBus
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.runtime import Runtime
from agent_runtime.training.expert_labeler import ExpertLabeler
from agent_runtime.training.note_labeler import NoteLabeler
from agent_runtime.training.remark_labeler import RemarkLabeler


def open_runtime(args, threads: int | None, *, announce: bool = True):
    """The runtime collect plays on and the data set's manifest for it: here, or on a Ray worker (`threads`: the
    CPUs Ray reserved for it)."""
    config = from_args(args)
    runtime = Runtime.open(config, model=args.model, threads=threads, adapter=args.adapter, env_seed=args.seed,
                           announce=announce, device=args.device, labels=True)  # the expert labels from them
    loaded = runtime.loaded
    return runtime, {
        "scenario": args.scenario, "buttons": list(runtime.env.buttons), "model_id": loaded.model_id,
        "model_weight_hash": loaded.base_weight_hash,  # what `train` puts adapters on
        "adapter": loaded.adapter.hash if loaded.adapter else None,
        "expert": "expert" if args.labeller == "full" else "view_expert", "expert_acts": args.expert_acts,
        "planner_writes": args.planner_writes if config.engine.think else None,  # notes.jsonl: the planner's notes
        "remarks": args.remarks,  # remarks.jsonl: the describer's remarks
        "seed": args.seed, "max_tics": args.max_tics,
        "clock": "fixed_cost" if args.fixed_cost else "compute", "cpu_path": loaded.cpu.summary(),
        "config": config.model_dump(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def collect_episode(runtime, log, index: int, args) -> dict:
    """Play episode `index`, its decisions labelled into `log` (anything with add(decision)); returns its summary."""
    env, seed = runtime.env, args.seed + index
    labeler = ExpertLabeler(env.buttons, log, screen_width=env.resolution[1], words=runtime.grammar.words,
                            expert_acts=args.expert_acts, expert=args.labeller,
                            aimed=runtime.config.engine.frame_line == "aimed")
    labeler.start_episode(index, seed)
    notes = NoteLabeler(runtime.tokenizer, log, planner_writes=args.planner_writes)
    notes.start_episode(index, seed)
    remarks = RemarkLabeler(runtime.tokenizer, log) if args.remarks else None
    if remarks is not None:
        remarks.start_episode(index)
    bus = EventBus("collect", keep=False)
    bus.sinks.append(labeler)  # executed commands: the expert's commands in flight; paragraphs: the note in view
    result = run_llm_episode(env, runtime, seed=seed, agent_seed=seed, max_tics=args.max_tics,
                             fixed_cost=fixed_cost(args), bus=bus, on_decision=labeler.on_decision,
                             on_paragraph=notes.on_paragraph, commentary=remarks is not None,
                             on_remark=remarks.on_remark if remarks is not None else None)
    return {"episode": index, "seed": seed, "decisions": labeler.decisions,
            "agreement": labeler.agreed / labeler.decisions if labeler.decisions else None,
            "expert_acted": labeler.expert_acted, "notes": notes.notes, "notes_planner_wrote": notes.written,
            "remarks": remarks.remarks if remarks is not None else 0,
            "kills": result["kills"], "reward": result["reward"], "tics": result["tics"],
            "actions_executed": result["actions_executed"], "actions_fenced": result["actions_fenced"]}


def episode_line(summary: dict) -> str:
    """An episode's progress line, here and on Ray."""
    agreement = "n/a" if summary["agreement"] is None else f"{summary['agreement']:.0%}"
    return (f"{summary['decisions']} decisions, model agrees with the expert on {agreement}, {summary['kills']} "
            f"kills, {summary['tics']} tics")


def print_totals(out, episodes: list[dict], as_json: bool = False) -> None:
    """The closing line (or JSON object), here and on Ray: what the data set holds now, resumed episodes included."""
    totals = {"out": str(out), "episodes": len(episodes), "decisions": sum(e["decisions"] for e in episodes)}
    print(json.dumps(totals) if as_json else f"{out}: {totals['episodes']} episode(s), {totals['decisions']} decisions",
          flush=True)
