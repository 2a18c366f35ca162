"""The `agent-runtime` command: one subcommand a module under agent_runtime/commands/."""

import argparse
import importlib
import logging
import sys

from agent_runtime import __version__, notices, signals
from agent_runtime.commands import VERBOSITY
from agent_runtime.errors import UserError
from envs.engine_guard import EngineDied

# Subcommand name -> module in agent_runtime.commands. Each module has add_arguments(p) and run(args) -> int.
COMMANDS = {
    "episode": "Run headless ViZDoom episodes and print their results.",
    "bench": "Benchmarks: kv (blocks and views), reaction (multi-stream vs sequential), play, interrupt, voice, "
             "memory, soak (a long real-time voice session).",
    "live": "Real-time play: the agent plays while you type or speak commands (--voice).",
    "transcribe": "Transcribe voice commands in a WAV file with the live VAD + grammar pipeline.",
    "replay": "Check a recording: replay its .lmp and compare frames with its events (--video, --rerun).",
    "timeline": "Draw a recording's events as a swimlane PNG.",
    "collect": "DAgger data: the agent plays, the lag-aware expert labels each decision (view tokens + commands).",
    "collect-frames": "Screens with their label-buffer objects: data for the screen detector (train-detector).",
    "train-detector": "Train the screen detector (frame lines from pixels) on a collect-frames data set.",
    "train": "Train a LoRA adapter on collected data: the model learns to score the expert's command highest.",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-runtime",
        description="A language model that plays ViZDoom while it keeps seeing frames, thinks and acts at once.",
        parents=[VERBOSITY])
    parser.add_argument("--version", action="version", version=f"agent-runtime {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"agent_runtime.commands.{name.replace('-', '_')}")
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[VERBOSITY])
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _run(args: argparse.Namespace) -> int:
    """The command's exit code: 2 for a UserError, 1 for an engine that died, 130/143 for a stop (one line each)."""
    try:
        try:
            return int(args._run(args) or 0)
        except (UserError, EngineDied) as e:  # EngineDied: commands that do not handle it themselves
            print(f"agent-runtime {args.command}: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, UserError) else 1
        finally:
            signals.finished()  # a signal from here on (the exit) is ignored: the code stays the command's
    except KeyboardInterrupt as e:  # the stop came before the work was over
        print(f"agent-runtime {args.command}: {e if isinstance(e, signals.Interrupted) else 'interrupted'}",
              file=sys.stderr)
        return getattr(e, "exit_code", 130)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    notices.log.setLevel(getattr(args, "log_level", logging.INFO))
    notices.log.debug("agent-runtime %s: %s", args.command,
                      {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "log_level"})
    with signals.handle_stops():  # SIGINT/SIGTERM: stop after the current step, exit 130/143
        code = _run(args)
        if argv is None:  # the command line: everything is closed; skip the 1-2 s interpreter teardown (torch),
            signals.exit_process(code)  # in which a Ctrl-C would kill the process with no line and exit -2
    return code


if __name__ == "__main__":
    sys.exit(main())
