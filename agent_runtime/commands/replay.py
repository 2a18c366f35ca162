"""`agent-runtime replay DIR`: check that a recording's .lmp re-renders the frames its events saw; film or re-run it."""

import argparse
import json

from agent_runtime.commands import add_options, output_file
from agent_runtime.notices import warning_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="recording directory (manifest.json, events.jsonl, episode.lmp)")
    p.add_argument("--video", metavar="OUT.mp4",
                   help="also write a video of the replay with action/Thinker/commentary overlays (.mp4: H.264, "
                        ".webm: VP9, with PyAV installed: the [video] extra)")
    p.add_argument("--rerun", action="store_true",
                   help="also play the episode again (same model, seeds, step costs and user inputs) and compare its "
                        "actions with the recorded ones; exit 1 when they differ")
    add_options(p, "--json")


def run(args: argparse.Namespace) -> int:
    from agent_runtime.recording.recording import Recording
    from agent_runtime.recording.replay_check import check_replay

    if args.video:  # before the replay: a video that cannot be written is one line
        output_file(args.video, "--video")
    recording = Recording.open(args.dir)
    check = check_replay(recording)
    result: dict = {"check": check.to_dict()}
    if args.video:
        from agent_runtime.recording.video import write_video

        result["video"] = write_video(recording, args.video)
    if args.rerun:
        from agent_runtime.recording.rerun import describe_rerun, rerun_recording

        result["rerun"] = rerun_recording(recording)
    if args.json:
        print(json.dumps(result, default=str))
    else:
        for warning in recording.warnings:
            warning_line(f"warning: {warning}")
        print(check.describe())
        if "video" in result:
            v = result["video"]
            print(f"video: {v['path']} ({v['frames']} frames at {v['fps']:g} fps, {v['size'][0]}x{v['size'][1]}, "
                  f"{v['codec']})")
        if "rerun" in result:  # describe_rerun was imported with --rerun
            print(describe_rerun(result["rerun"]))
    return 0 if check.ok and result.get("rerun", {}).get("same_actions", True) else 1
