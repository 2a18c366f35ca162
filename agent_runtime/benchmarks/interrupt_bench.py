"""`bench interrupt`: how fast spoken commentary goes silent when the user talks over it, in real time.

A user phrase mixed into the device-free microphone at a random moment of the commentary; per barge-in, VAD
detection and the generation bump to the first silent speaker block. A real device adds its output latency.
"""

import time

import numpy as np

from agent_runtime.benchmarks.measure import Timing, progress as default_progress, shown, stats
from agent_runtime.benchmarks.scripted_voice import BargeInTrial, measure, open_voice, speak, synthesize_phrases, wait_until
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.percentiles import percentile
from agent_runtime.voice.voice_io import MIC_BLOCK, MIC_RATE, SPEAKER_BLOCK

TARGET_P95_MS = 50.0
COMMENTARY = (
    "Two imps ahead and one more on the left side of the hall.",
    "I am turning left to face them, then I will shoot the nearest one.",
    "After that I will back off toward the door before they can reach me.",
    "There is a medkit near the pillar, so I will pick it up on the way.",
)
USER_PHRASES = ("stop", "turn left", "turn right", "shoot", "go back")


def run_interrupt_bench(barge_ins: int = 20, mode: str = "immediate", seed: int = 0, progress=default_progress) -> dict:
    """Inject `barge_ins` barge-ins into real-time commentary; returns the summary (JSON-ready) and per-trial rows."""
    rng, phrases = np.random.default_rng(seed), synthesize_phrases(USER_PHRASES)
    bus = EventBus("interrupt", clock="realtime")
    voice, mic, speaker = open_voice(phrases, mode=mode, seed=seed, bus=bus, keep=None)
    voice.start()
    trials: list[BargeInTrial] = []
    started = time.monotonic()
    try:
        for i in range(barge_ins):
            trials.append(_one_trial(rng, phrases, voice, mic, speaker))
            t = trials[-1]
            progress(f"barge-in {i + 1}/{barge_ins} ({t.phrase!r} at {t.offset_s:.2f} s): {t.outcome}"
                     f"{' ' + t.reason if t.reason else ''}, detection -> silence "
                     f"{shown(t.detection_to_silence_ms, ' ms', '.1f')}"
                     f" ({t.detection_to_silence_blocks} blocks)")
    finally:
        voice.close()
    first_audio = [e.payload["first_audio_ms"] for e in bus.of_kind(Kind.TTS_DONE)]
    return _summarize(trials, mode, seed, voice.playback, speaker, first_audio, time.monotonic() - started)


def _one_trial(rng, phrases, voice, mic, speaker) -> BargeInTrial:
    """Queue the commentary, inject one phrase at a random moment once it sounds, measure, and reset."""
    said = time.monotonic()
    for sentence in COMMENTARY:
        voice.tts.say(sentence)
    wait_until(lambda: speaker.audible, 5.0)
    first = next((b for b in list(speaker.blocks) if b.t >= said and not b.silent), None)
    phrase, offset = USER_PHRASES[int(rng.integers(len(USER_PHRASES)))], float(rng.uniform(0.3, 1.6))
    time.sleep(max(0.0, (first.t if first else time.monotonic()) + offset - time.monotonic()))
    trial = BargeInTrial(phrase, round(offset, 3))
    if first is not None:
        trial.say_to_first_sound_ms = (first.t - said) * 1000.0
    heard = speak(voice, mic, phrases[phrase], timeout=6.0)  # heard out, the controller settled
    if heard.record is not None:
        measure(trial, heard.record, voice.playback, speaker)
    if trial.outcome != "interrupted":  # the VAD never fired, or a pause resumed: stop it for the next trial
        voice.tts.abort_and_clear()
        voice.playback.clear()
    voice.tts.wait_idle(5.0)
    wait_until(lambda: not voice.playback.active, 2.0)
    time.sleep(0.1)
    return trial


def _summarize(trials, mode, seed, playback, speaker, first_audio, wall_s) -> dict:
    def measured(attr):
        return [getattr(t, attr) for t in trials if getattr(t, attr) is not None]

    detection = stats("interrupt_to_silence_ms", measured("detection_to_silence_ms"), ("p50", "p95", "max", "min"))
    p95 = detection["interrupt_to_silence_ms_p95"]
    block_ms = SPEAKER_BLOCK * 1000.0 / playback.sample_rate
    return {
        "barge_ins": len(trials), "mode": mode, "seed": seed,
        **{outcome: sum(t.outcome == outcome for t in trials) for outcome in ("interrupted", "resumed", "missed")},
        **detection,
        **stats("interrupt_to_silence_blocks", measured("detection_to_silence_blocks")),
        **stats("bump_to_silence_ms", measured("bump_to_silence_ms")),
        **stats("bump_to_silence_blocks", measured("bump_to_silence_blocks")),
        **stats("detection_to_bump_ms", measured("detection_to_bump_ms"), ("p50", "max")),
        "target_p95_ms": TARGET_P95_MS, "target_met": p95 is not None and p95 <= TARGET_P95_MS,
        "late_chunks_discarded": playback.stats.discarded_stale,
        "chunks_dropped_too_old": playback.stats.discarded_late,
        "audible_blocks_after_silence": sum(t.audible_blocks_after_silence for t in trials),
        **stats("tts_first_audio_ms", [ms for ms in first_audio if ms is not None], ("p50", "max")),
        **stats("say_to_first_sound_ms", measured("say_to_first_sound_ms"), ("p50", "max")),
        "playback_underruns": playback.stats.underruns, "speaker_blocks": len(speaker.blocks),
        **stats("speaker_late_ms", [b.late_ms for b in speaker.blocks], ("p95", "max")),
        "speaker_block": {"frames": SPEAKER_BLOCK, "rate": playback.sample_rate, "ms": round(block_ms, 2)},
        "mic_block": {"frames": MIC_BLOCK, "rate": MIC_RATE, "ms": MIC_BLOCK * 1000.0 / MIC_RATE},
        "wall_s": round(wall_s, 1), "trials": [t.__dict__ for t in trials],
    }


def print_report(result: dict) -> None:
    """The human-readable summary: medians with spread (min..max), then the tail and the counters."""
    def line(label, key_ms, key_blocks=None):
        values = [t[key_ms] for t in result["trials"] if t[key_ms] is not None]
        if not values:
            print(f"{label}: n/a")
            return
        blocks = ""
        if key_blocks:
            bl = [t[key_blocks] for t in result["trials"] if t[key_blocks] is not None]
            blocks = f"; blocks p50 {percentile(bl, 50):.0f}, p95 {percentile(bl, 95):.0f}, max {max(bl)}"
        print(f"{label}: {Timing([v / 1000.0 for v in values]).ms()}, p95 {percentile(values, 95):.1f} ms{blocks}")

    sb = result["speaker_block"]
    print(f"{result['barge_ins']} barge-ins, mode {result['mode']}: {result['interrupted']} interrupted, "
          f"{result['resumed']} resumed, {result['missed']} missed; "
          f"speaker block {sb['frames']} frames = {sb['ms']} ms")
    line("detection -> silence", "detection_to_silence_ms", "detection_to_silence_blocks")
    line("bump -> silence     ", "bump_to_silence_ms", "bump_to_silence_blocks")
    if result["mode"] == "pause_confirm":
        line("detection -> bump (confirm)", "detection_to_bump_ms")
    p95 = result["interrupt_to_silence_ms_p95"]
    verdict = "n/a" if p95 is None else ("met" if result["target_met"] else "NOT met")
    print(f"target p95 <= {result['target_p95_ms']:.0f} ms after detection: {verdict}"
          f"{'' if p95 is None else f' ({p95:.1f} ms)'}")
    print(f"late chunks discarded {result['late_chunks_discarded']}, audible blocks after silence "
          f"{result['audible_blocks_after_silence']}, chunks dropped too old {result['chunks_dropped_too_old']}, "
          f"playback underruns {result['playback_underruns']}")
    fa, fs = result["tts_first_audio_ms_p50"], result["say_to_first_sound_ms_p50"]
    print(f"TTS first audio p50 {fa:.1f} ms (max {result['tts_first_audio_ms_max']:.1f}); say -> first sound block "
          f"p50 {fs:.1f} ms (max {result['say_to_first_sound_ms_max']:.1f}); speaker callback lateness p95 "
          f"{result['speaker_late_ms_p95']:.1f} ms, max {result['speaker_late_ms_max']:.1f} ms"
          if fa is not None and fs is not None else "TTS first audio: n/a")
