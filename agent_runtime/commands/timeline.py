"""`agent-runtime timeline DIR -o timeline.png`: a swimlane picture of (a stretch of) a recording."""

import argparse
import json

from agent_runtime.commands import add_options, output_file
from agent_runtime.errors import UserError
from agent_runtime.notices import warning_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="recording directory")
    p.add_argument("-o", "--out", default="timeline.png", help="PNG to write (default timeline.png)")
    p.add_argument("--from", dest="from_s", type=float, metavar="S",
                   help="start, session seconds (default: first event)")
    p.add_argument("--to", dest="to_s", type=float, metavar="S", help="end, session seconds (default: last event)")
    add_options(p, "--json")


def run(args: argparse.Namespace) -> int:
    from agent_runtime.recording.recording import Recording
    from agent_runtime.recording.timeline import MARKERS, render_timeline
    from agent_runtime.session.events import Kind

    if args.from_s is not None and args.to_s is not None and args.to_s <= args.from_s:
        raise UserError(f"--to ({args.to_s:g}) must be after --from ({args.from_s:g})")
    if not args.out.lower().endswith(".png"):
        raise UserError(f"-o {args.out}: the timeline is a PNG; give a file name ending in .png")
    output_file(args.out, "-o")
    recording = Recording.open(args.dir)
    events = recording.events
    for warning in recording.warnings:
        warning_line(f"warning: {warning}")
    drawn = render_timeline(events, args.out, from_s=args.from_s, to_s=args.to_s,
                            title=f"{recording.dir.name} ({recording.manifest.scenario})")
    print(json.dumps(drawn) if args.json else f"{drawn['path']}: {drawn['n_events']} events from {drawn['from_s']:.2f} "
          f"s to {drawn['to_s']:.2f} s, {drawn['n_generation_bumps']} generation bumps, "
          f"{drawn['drawn'].get(MARKERS[Kind.THINKER_NOTE][3], 0)} Thinker notes")
    return 0
