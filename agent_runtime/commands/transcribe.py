"""`agent-runtime transcribe FILE.wav`: run the live listening pipeline (VAD + command grammar) on a file.

The file is pushed block by block as a microphone would deliver it, so what is printed is what live produces.
"""

import argparse
import json

from agent_runtime.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.wav", help="a PCM WAV file, any common sample rate, mono or stereo")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per hypothesis (text, final, t_ms, audio_age_ms, command)")
    p.add_argument("--finals-only", action="store_true", help="print only final hypotheses")


def run(args: argparse.Namespace) -> int:
    from agent_runtime.voice.audio_io import BLOCK_FRAMES, load_audio_16k
    from agent_runtime.voice.recognizer import Hypothesis, ListeningPipeline

    samples = load_audio_16k(args.file)
    if samples.size < BLOCK_FRAMES:
        raise UserError(f"{args.file} is too short to transcribe ({samples.size} samples at 16 kHz; need 32 ms)")
    for frame in ListeningPipeline().run(samples, BLOCK_FRAMES):
        if not isinstance(frame, Hypothesis) or (args.finals_only and not frame.final):
            continue
        if args.json:
            print(json.dumps(frame.to_json()), flush=True)
        else:
            kind = "final  " if frame.final else "partial"
            command = f"  -> {frame.command}" if frame.final and frame.command else ""
            print(f"{frame.t_ms / 1000:8.3f}s  {kind}  {frame.text!r}{command}  "
                  f"(audio age {frame.audio_age_ms:.1f} ms)", flush=True)
    return 0
