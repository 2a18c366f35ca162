"""`agent-runtime collect`: DAgger data (training/collection.py). The multi-stream agent plays as it is, the
lag-aware expert labels each decision, the planner each Thinker paragraph and (--remarks) the describer each remark,
and the view tokens with the labels go to an append-only data set. Run it
again on the same --out to resume: a run killed mid-episode loses only that episode; finished ones are never touched.
"""

import argparse
import time

from agent_runtime import fanout
from agent_runtime.commands import add_options, at_least, own_dir, require_cuda
from agent_runtime.errors import UserError
from agent_runtime.notices import progress_bar, stderr_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, "--scenario")
    p.add_argument("--episodes", type=int, required=True, help="episodes the data set should hold in all")
    p.add_argument("--out", required=True, help="data set directory (created, or resumed when it exists)")
    add_options(p, "--seed", "--model", "--dtype", "--device")
    p.add_argument("--adapter", help="LoRA adapter the agent plays with (DAgger: the newest one; default: the config's "
                                     "model.adapter, the one shipped for --scenario; `none`: the untrained model)")
    p.add_argument("--expert-acts", type=float, default=0.0, metavar="P",
                   help="DAgger's mix: each decision executes the expert's command instead of the model's with "
                        "probability P (default 0: the model plays; 1: the expert plays, the model's view is recorded)")
    p.add_argument("--planner-writes", type=float, default=1.0, metavar="P",
                   help="each Thinker paragraph is the planner's note (written into the view for the other streams "
                        "to read) with probability P, else the model's (default 1; the planner's note is stored as "
                        "the label either way, in notes.jsonl)")
    p.add_argument("--remarks", action="store_true",
                   help="the agent also makes remarks, as in `live` (its commentary stream runs), and the describer's "
                        "remark for each remark's view is stored as its label, in remarks.jsonl (default: no remarks)")
    add_options(p, "--max-tics", "--config", "--threads", "--fixed-cost", "--frame-source", "--json")
    p.add_argument("--labeller", choices=("view", "full"), default="view",
                   help="who labels: view (default), the expert restricted to what the action view holds, whose labels "
                        "a model can learn; full, the privileged expert of `episode --policy expert`")
    fanout.add_arguments(p)  # --workers, --ray-address


def run(args: argparse.Namespace) -> int:
    from agent_runtime.fanout.collect_fanout import run_collect
    from agent_runtime.session.episodes import fixed_cost
    from agent_runtime.training.collection import collect_episode, episode_line, open_runtime, print_totals
    from agent_runtime.config import from_args
    from agent_runtime.training.decision_log import DECISIONS, EPISODES, MANIFEST, NOTES, REMARKS, DecisionLog

    at_least(args, 1, "--episodes", "--max-tics")
    for flag in ("--expert-acts", "--planner-writes"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if not 0.0 <= value <= 1.0:
            raise UserError(f"{flag} must be a probability between 0 and 1 (got {value})")
    fanout.check(args)
    require_cuda(args.device)
    from_args(args)  # the flags left unset take the config's values
    out = own_dir(args.out, "--out", frozenset({DECISIONS, EPISODES, MANIFEST, NOTES, REMARKS}), MANIFEST,
                  "a data set from `collect`")
    if fanout.wanted(args):  # Ray workers play and label; this process writes the data set in episode order
        return run_collect(args, out)
    runtime, manifest = open_runtime(args, args.threads)  # (its grammar refused a scenario with delta buttons)
    with runtime:
        runtime.time_bounds(fixed_cost(args), announce=True)  # the fence the data plays under
        log = DecisionLog(out, manifest)
        try:
            if log.next_episode:
                stderr_line(f"resuming {out}: {log.next_episode} episode(s) already collected")
            with progress_bar(args.episodes - log.next_episode, "collect", "episode") as bar:
                for index in range(log.next_episode, args.episodes):
                    t0 = time.monotonic()
                    summary = collect_episode(runtime, log, index, args)
                    log.finish_episode(summary)
                    bar.update()
                    stderr_line(f"[{index + 1}/{args.episodes}] {episode_line(summary)}, "
                                f"{time.monotonic() - t0:.1f} s")
        finally:
            log.close()
    print_totals(out, log.episodes, args.json)
    return 0
