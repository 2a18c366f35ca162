"""`bench voice`: synthesized voice commands spoken into a device-free microphone in real time during live play.

Measures end of speech -> the commanded action executed in the env, and recognition accuracy.
"""

import numpy as np

from agent_runtime.benchmarks.measure import bench_bar, progress, stats
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import run_live
from agent_runtime.voice.audio_io import resample
from agent_runtime.voice.recognizer import COMMAND_PAUSE_MS
from agent_runtime.voice.tts import EspeakTts
from agent_runtime.voice.voice_commands import PHRASES
from agent_runtime.voice.voice_io import MIC_RATE, VoiceIO

GAP_S = 1.8


def synthesize_script(script: list[tuple[str, str]]) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """One mic track: lead-in, then each phrase followed by a gap; returns it and each phrase's (onset, end) in s:
    its first and last samples above -40 dBFS."""
    tts = EspeakTts(SessionGeneration())
    track, spans, t = [np.zeros(int(0.8 * MIC_RATE), np.float32)], [], 0.8
    for phrase, _ in script:
        audio = resample(tts.synthesize(phrase), tts.sample_rate, MIC_RATE)
        loud = np.flatnonzero(np.abs(audio) > 0.01)
        spans.append((t + loud[0] / MIC_RATE, t + (loud[-1] + 1) / MIC_RATE))
        track += [audio, np.zeros(int(GAP_S * MIC_RATE), np.float32)]
        t += len(audio) / MIC_RATE + GAP_S
    return np.concatenate(track), spans


def run_voice_bench(env, runtime, *, commands: int, seed: int = 0, mode: str = "immediate",
                    command_pause_ms: int = COMMAND_PAUSE_MS) -> dict:
    """Speak `commands` seeded commands the scenario can act on into live play; the result JSON-ready."""
    usable = [(p, c) for p, c in PHRASES.items() if c in env.buttons]  # what the scenario can do
    script = [usable[i] for i in np.random.default_rng(seed).integers(0, len(usable), commands)]  # (phrase, command)
    track, spans = synthesize_script(script)
    voice = VoiceIO(SessionGeneration(), mode=mode, mic_samples=track, command_pause_ms=command_pause_ms)
    bus = EventBus()
    seconds = len(track) / MIC_RATE + 0.5
    progress(f"speaking {commands} commands over {seconds:.0f} s of real-time play")
    with bench_bar(seconds, "voice", "s"):  # the game's seconds: 35 tics each in real time
        result = run_live(env, runtime, seconds=seconds, voice=voice, bus=bus,
                          progress=lambda report: progress(None, report["tic"] / 35))
    said = bus.of_kind(Kind.USER_INPUT)
    executed = [e for e in bus.of_kind(Kind.ACTION_EXECUTED) if e.stream == "user"]
    from_end, from_onset, correct = [], [], 0
    for (phrase, command), (onset_s, end_s) in zip(script, spans):
        onset_wall, end_wall = voice.t_start + onset_s, voice.t_start + end_s
        match = next((e for e in said if onset_wall <= e.t_mono <= end_wall + GAP_S), None)  # a partial may act
        if match is None or (match.payload.get("command") or "").split()[:1] != [command]:  # "TURN_LEFT 4"
            continue
        correct += 1
        act = next((e for e in executed if e.seq > match.seq), None)
        if act is not None:
            from_end.append((act.t_mono - end_wall) * 1000.0)  # negative: acted before the phrase ended
            from_onset.append((act.t_mono - onset_wall) * 1000.0)
    return {
        "commands": len(script), "recognized_correctly": correct, "command_pause_ms": command_pause_ms,
        "recognition_accuracy": correct / len(script) if script else None,
        **stats("speech_end_to_action_ms", from_end), **stats("speech_onset_to_action_ms", from_onset),
        "samples_ms": [round(x, 1) for x in from_end], "live": result,
    }
