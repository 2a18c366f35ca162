"""`agent-runtime episode`: play headless episodes with a policy (session/episodes.py), here or on Ray workers;
print each one's reward, kills and tics and append it to results.jsonl."""

import argparse
import json
from contextlib import nullcontext

from agent_runtime import fanout, signals
from agent_runtime.commands import (MODEL_OPTIONS, add_on_disk_full, add_options, agent_name, at_least, require_cuda,
                                    writable_dir)
from agent_runtime.errors import UserError
from agent_runtime.notices import progress_bar, stderr_line

POLICIES = ("llm", "sequential", "no_think", "scripted", "expert", "view_expert", "view_expert_noted", "random")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, "--scenario")
    p.add_argument("--episodes", type=int, default=1, help="number of episodes (default 1)")
    p.add_argument("--policy", choices=POLICIES, default="llm", type=agent_name,
                   help="who plays: llm = the multi-stream agent (default); sequential = read-think-act with the same "
                        "model; no_think = read-act; scripted = aim-and-shoot from labels; expert = "
                        "lag-aware aim with hold counts from labels; view_expert = what collect labels with (the "
                        "newest frame line and its previous command); view_expert_noted = that, reading the "
                        "planner's notes; random (multi_stream: llm's old name)")
    add_options(p, "--seed", "--config", "--max-tics", "--fixed-cost", "--frame-source")
    p.add_argument("--clock", choices=("sync", "realtime"), help="override the config's clock")
    p.add_argument("--out", help="directory for the episodes' recordings and results.jsonl "
                                 "(default: recordings go to the config's recordings_dir, results only to stdout)")
    p.add_argument("--lag-tics", type=int, default=0, help="the policy sees frames this many tics old (default 0)")
    add_options(p, "--json", "--no-record", *MODEL_OPTIONS, "--no-think-adapter")
    p.add_argument("--think-tokens", type=int, default=64,
                   help="sequential policy: thought tokens per cycle (default 64)")
    p.add_argument("--on-engine-death", choices=("exit", "continue"), default="exit",
                   help="when the ViZDoom engine dies or hangs mid-episode (its recording is closed as incomplete "
                        "either way): exit = stop with exit code 1 (default); continue = go on with the next "
                        "episode on a fresh engine, and exit 1 at the end")
    add_on_disk_full(p, "run")
    p.add_argument("--user-text", action="append", metavar="STEP:TEXT",
                   help="llm policy: type TEXT to the agent at engine step STEP (repeatable); a command such as "
                        "TURN_LEFT, 'ATTACK 3' or 'turn left' also acts at once, as typed in live. Recorded as "
                        "user_input, replayed by --rerun")
    fanout.add_arguments(p)  # --workers, --ray-address


def _readable(result: dict) -> str:
    from agent_runtime.benchmarks.measure import shown
    from agent_runtime.benchmarks.words_bench import note_rates

    line = (f"episode {result['episode']}: reward {result['reward']:g}, kills {result['kills']}, tics {result['tics']}"
            f" ({result['policy']} on {result['scenario']}, seed {result['seed']})")
    if "actions_executed" in result:
        p50, p95 = result.get("reaction_ms_p50"), result.get("reaction_ms_p95")
        line += (f"\n  actions executed {result['actions_executed']}, fenced {result['actions_fenced']}, "
                 f"frames dropped {result['frames_dropped']}, thinker tokens {result['thinker_tokens']}, "
                 f"reaction p50 {shown(p50, ' ms')} p95 {shown(p95, ' ms')}")
    if result.get("thinker_paragraphs", 0) > 0:  # the Thinker wrote: how much of it were notes, and read by decisions
        rates = note_rates({key: max(result[key], 0) for key in ("tics", "notes", "decisions", "decisions_with_note")})
        line += (f"\n  notes {result['notes']} of {result['thinker_paragraphs']} paragraphs "
                 f"({shown(rates['notes_per_minute'], ' a minute')}), decisions with a note in view "
                 f"{result['decisions_with_note']}/{result['decisions']}")
    return line


def run(args: argparse.Namespace) -> int:
    from agent_runtime.config import from_args
    from agent_runtime.fanout.episode_fanout import run_episodes
    from agent_runtime.recording.user_script import parse_user_text_args
    from agent_runtime.recording.write_guard import RecordingStopped, WriteGuard
    from agent_runtime.session.episodes import make_player, open_env, play_episodes

    at_least(args, 1, "--episodes", "--max-tics", "--think-tokens", "--threads")
    at_least(args, 0, "--lag-tics")
    if args.user_text and args.policy != "llm":
        raise UserError("--user-text is for the llm policy")
    fanout.check(args)
    require_cuda(args.device)
    config = from_args(args)
    user_texts = parse_user_text_args(args.user_text)
    out_dir = writable_dir(args.out, "--out") if args.out else None
    record_root = None if args.no_record else out_dir or writable_dir(config.recordings_dir, "recordings_dir")
    bar = progress_bar(args.episodes, "episodes", "episode")
    if fanout.wanted(args):  # --workers N / --ray-address: the same episodes, played by Ray workers
        with bar, (out_dir / "results.jsonl").open("a") if out_dir else nullcontext() as results_file:
            return run_episodes(args, config, user_texts, record_root, lambda done, result, where: report(
                args, done, result, results_file, where=where, bar=bar))

    env = open_env(config, config.seed, args.policy)
    try:
        player = make_player(args, config, env, user_texts)
    except BaseException:
        env.close()
        raise
    results_file = (out_dir / "results.jsonl").open("a") if out_dir else None
    guard = WriteGuard(args.on_disk_full)  # a write that fails mid-run stops every file of the run, not the play
    try:
        with signals.stoppable():
            lost = play_episodes(args, config, player, env, record_root, guard,
                                 lambda done, result: report(args, done, result, results_file, guard, bar=bar))
    except RecordingStopped:  # --on-disk-full stop: the guard's line said why; the recording is closed
        return 1
    finally:
        bar.close()
        if results_file is not None:
            try:
                results_file.close()
            except OSError as e:
                guard.report(results_file.name, e)
    return 1 if lost or (guard.failed and guard.policy == "stop") else 0


def report(args, done: int, result: dict, results_file, guard=None, where: str = "", *, bar) -> None:
    """An episode's result: the progress line (the `done`-th of the run) and `bar`, stdout, results.jsonl."""
    bar.update()
    stderr_line(f"[{done}/{args.episodes}] {where}{result['tics']} tics, {result['kills']} kills, "
                f"reward {result['reward']:g}, {result['wall_s']:.1f} s")
    if "recording" in result:
        stderr_line(f"recording: {result['recording']}")
    print(json.dumps(result) if args.json else _readable(result), flush=True)
    if results_file is None or (guard is not None and guard.failed):
        return
    try:
        results_file.write(json.dumps(result) + "\n")
        results_file.flush()
    except OSError as e:  # a full disk: stdout has the result; the guard's one line says what stopped
        if guard is None:
            raise
        guard.report(results_file.name, e)
