"""`bench interrupt`: how fast spoken commentary goes silent when the user talks over it, in real time.

No sound card is needed, but nothing runs faster than real time either: a speaker thread pulls the
PlaybackBuffer's output callback one 1024-frame block at a time at 22.05 kHz (46 ms a block), and a
microphone thread pushes 512-sample blocks at 16 kHz (32 ms) through the VAD and the
BargeInController, while a TtsWorker synthesizes several queued sentences of commentary. At a
random moment while the commentary plays, a synthesized user phrase ("stop", "turn left", ...)
is mixed into the microphone stream. Per barge-in we measure:

  detection -> silence: VAD onset detected (wall clock) to the first silent block handed to the
                        speaker, in ms and in blocks (0 = the very next block was silent); the onset
                        is the tentative one (SpeechOnset) where the mode pauses on it, as live;
  bump -> silence:      the generation bump to the first silent block (PlaybackBuffer's own record);
  late chunks:          chunks of the interrupted generation dropped instead of played (queued at
                        the bump or synthesized after it), and audible blocks after the silence (0).

Times are "block handed to the device"; a real device adds its own output latency on top.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from agent_runtime.benchmarks.measure import progress as default_progress
from agent_runtime.percentiles import percentile, summarize
from agent_runtime.voice.audio_io import BLOCK_FRAMES, SAMPLE_RATE, resample
from agent_runtime.voice.realtime_pump import RealTimePump

SPEAKER_BLOCK = 1024
MIC_BLOCK = BLOCK_FRAMES  # 512 samples at 16 kHz
TARGET_P95_MS = 50.0
COMMENTARY = (
    "Two imps ahead and one more on the left side of the hall.",
    "I am turning left to face them, then I will shoot the nearest one.",
    "After that I will back off toward the door before they can reach me.",
    "There is a medkit near the pillar, so I will pick it up on the way.",
)
USER_PHRASES = ("stop", "turn left", "turn right", "shoot", "go back")
USER_VOICE = "en"  # British English: a different voice from the agent's en-us commentary


@dataclass
class SpeakerBlock:
    """One output block as the sound card got it: when it was handed over and whether it was silent."""

    t: float  # monotonic time the callback returned
    silent: bool
    late_ms: float  # how far behind its real-time slot the callback ran


class RealTimeSpeaker:
    """A thread that pulls an output callback block by block at the real audio rate, as a sound card does."""

    def __init__(self, callback, samplerate: int, blocksize: int = SPEAKER_BLOCK):
        self.callback = callback
        self.samplerate = samplerate
        self.blocksize = blocksize
        self.blocks: list[SpeakerBlock] = []
        self._out = np.zeros((blocksize, 1), np.float32)
        self._pump = RealTimePump(self._pull, blocksize / samplerate)
        self._thread = threading.Thread(target=self._pump.run, name="bench-speaker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._pump.stop()
        self._thread.join(timeout=5)

    def _pull(self, late_s: float) -> None:
        self.callback(self._out, self.blocksize, None, None)
        self.blocks.append(SpeakerBlock(time.monotonic(), not np.any(self._out), late_s * 1000.0))


class RealTimeMicrophone:
    """A thread that pushes 512-sample blocks at 16 kHz in real time: low noise, plus injected speech.

    Each block goes to `on_block(block, arrival)` when it would have finished recording.
    """

    def __init__(self, on_block, seed: int, noise_rms: float = 3e-4):
        self.on_block = on_block
        self._rng = np.random.default_rng(seed)
        self.noise_rms = noise_rms
        self._pending = np.zeros(0, np.float32)
        self._lock = threading.Lock()
        # a block is delivered once it has been recorded: the first one period after the start
        self._pump = RealTimePump(self._deliver, MIC_BLOCK / SAMPLE_RATE, first_slot=1)
        self._thread = threading.Thread(target=self._pump.run, name="bench-microphone", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._pump.stop()
        self._thread.join(timeout=5)

    def inject(self, samples: np.ndarray) -> None:
        """Mix `samples` (16 kHz) into the stream from the next block on."""
        with self._lock:
            self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32)])

    @property
    def injecting(self) -> bool:
        return self._pending.size > 0

    def _deliver(self, late_s: float) -> None:
        block = self._rng.normal(0.0, self.noise_rms, MIC_BLOCK).astype(np.float32)
        with self._lock:
            if self._pending.size:
                n = min(MIC_BLOCK, self._pending.size)
                block[:n] += self._pending[:n]
                self._pending = self._pending[n:]
        self.on_block(block, time.monotonic())


@dataclass
class BargeInTrial:
    """What one injected barge-in did."""

    phrase: str
    offset_s: float  # how far into the audible commentary the phrase was injected
    outcome: str = "missed"  # "interrupted" | "resumed" (pause_confirm false trigger) | "missed"
    reason: str = ""
    detection_to_silence_ms: float | None = None
    detection_to_silence_blocks: int | None = None
    bump_to_silence_ms: float | None = None
    bump_to_silence_blocks: int | None = None
    detection_to_bump_ms: float | None = None
    audible_blocks_after_silence: int = 0
    say_to_first_sound_ms: float | None = None


def _wait(predicate, timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def _user_phrases() -> dict[str, np.ndarray]:
    """Each user phrase spoken by espeak-ng in another voice, as 16 kHz float32 with a short tail."""
    from agent_runtime.generation import SessionGeneration
    from agent_runtime.voice.tts import EspeakTts

    tts = EspeakTts(SessionGeneration(), voice=USER_VOICE, words_per_minute=150)  # never bumped
    out = {}
    for phrase in USER_PHRASES:
        x = resample(tts.synthesize(phrase), tts.sample_rate, SAMPLE_RATE) * 0.8
        out[phrase] = np.concatenate([x, np.zeros(SAMPLE_RATE // 4, np.float32)])
    return out


def run_interrupt_bench(barge_ins: int = 20, mode: str = "immediate", seed: int = 0,
                        progress=default_progress) -> dict:
    """Inject `barge_ins` barge-ins into real-time commentary; returns the summary (JSON-ready) and per-trial rows."""
    from agent_runtime.generation import SessionGeneration
    from agent_runtime.voice.barge_in import ONSET_CUES, BargeInController
    from agent_runtime.voice.playback import PlaybackBuffer
    from agent_runtime.voice.recognizer import ListeningPipeline
    from agent_runtime.voice.tts import EspeakTts, TtsWorker

    if mode not in ("immediate", "pause_confirm"):
        raise ValueError(f"mode must be immediate or pause_confirm, not {mode!r}")
    rng = np.random.default_rng(seed)
    phrases = _user_phrases()
    pipeline = ListeningPipeline()
    pipeline.run(phrases["turn left"])  # warm up ONNX and the recognizer's CMN off the clock
    pipeline.vad.reset()

    session = SessionGeneration()
    tts = EspeakTts(session)
    playback = PlaybackBuffer(session, tts.sample_rate)
    synth_results = []
    worker = TtsWorker(tts, playback.push, on_result=synth_results.append)
    controller = BargeInController(session, playback, worker, mode=mode, onset_cues=ONSET_CUES[mode])  # as live

    def on_mic_block(block: np.ndarray, arrival: float) -> None:  # runs on the microphone thread
        frames = pipeline.push(block, arrival) if controller.listening else []
        controller.feed(frames, pipeline.stream_ms)

    speaker = RealTimeSpeaker(playback.callback, tts.sample_rate)
    mic = RealTimeMicrophone(on_mic_block, seed)
    speaker.start()
    mic.start()
    trials: list[BargeInTrial] = []
    started = time.monotonic()
    try:
        for i in range(barge_ins):
            trials.append(_one_trial(rng, phrases, worker, playback, controller, pipeline, speaker, mic))
            t = trials[-1]
            shown = "n/a" if t.detection_to_silence_ms is None else f"{t.detection_to_silence_ms:.1f} ms"
            progress(f"barge-in {i + 1}/{barge_ins} ({t.phrase!r} at {t.offset_s:.2f} s): {t.outcome}"
                     f"{' ' + t.reason if t.reason else ''}, detection -> silence {shown}"
                     f" ({t.detection_to_silence_blocks} blocks)")
    finally:
        mic.stop()
        speaker.stop()
        playback.close()
        worker.close()
    return _summarize(trials, mode, seed, playback, speaker, synth_results, time.monotonic() - started)


def _one_trial(rng, phrases, worker, playback, controller, pipeline, speaker, mic) -> BargeInTrial:
    """Queue the commentary, inject one phrase at a random moment once it sounds, measure, and reset."""
    n_records = len(controller.records)
    said = time.monotonic()
    for sentence in COMMENTARY:
        worker.say(sentence)
    _wait(lambda: any(b.t >= said and not b.silent for b in speaker.blocks[-4:]), 5.0)
    first = next((b for b in list(speaker.blocks) if b.t >= said and not b.silent), None)
    phrase = USER_PHRASES[int(rng.integers(len(USER_PHRASES)))]
    offset = float(rng.uniform(0.3, 1.6))
    time.sleep(max(0.0, (first.t if first else time.monotonic()) + offset - time.monotonic()))
    trial = BargeInTrial(phrase, round(offset, 3))
    if first is not None:
        trial.say_to_first_sound_ms = (first.t - said) * 1000.0
    mic.inject(phrases[phrase])
    # wait for the phrase to be heard out and the controller to settle
    _wait(lambda: not mic.injecting and not pipeline.vad.in_speech
          and all(r.outcome != "pending" for r in controller.records[n_records:]), 6.0)
    time.sleep(2 * SPEAKER_BLOCK / playback.sample_rate)
    records = controller.records[n_records:]
    if not records:  # the VAD never fired while the commentary played: stop it for the next trial
        worker.abort_and_clear()
        playback.clear()
    else:  # the record that interrupted (a tentative pause resumed before it is not the barge-in's silence)
        _measure(trial, next((r for r in records if r.outcome == "interrupted"), records[0]), playback, speaker)
        if trial.outcome != "interrupted":
            worker.abort_and_clear()
            playback.clear()
    worker.wait_idle(5.0)
    _wait(lambda: not playback.active, 2.0)
    time.sleep(0.1)
    return trial


def _measure(trial: BargeInTrial, record, playback, speaker: RealTimeSpeaker) -> None:
    trial.outcome, trial.reason = record.outcome, record.reason
    trial.detection_to_bump_ms = record.detection_to_bump_ms
    after = [b for b in list(speaker.blocks) if b.t >= record.detected_wall]
    k = next((j for j, b in enumerate(after) if b.silent), None)
    if k is not None:
        trial.detection_to_silence_blocks = k
        trial.detection_to_silence_ms = (after[k].t - record.detected_wall) * 1000.0
        if trial.outcome == "interrupted":  # stale audio must never come back once silent
            trial.audible_blocks_after_silence = sum(not b.silent for b in after[k + 1:])
    if record.generation is not None:
        bump = next((r for r in playback.stats.interruptions if r["generation"] == record.generation), None)
        if bump is not None:
            trial.bump_to_silence_blocks = bump["silent_after_blocks"]
            trial.bump_to_silence_ms = bump["silence_ms"]


def _summarize(trials, mode, seed, playback, speaker, synth_results, wall_s) -> dict:
    det_ms = [t.detection_to_silence_ms for t in trials if t.detection_to_silence_ms is not None]
    det_blocks = [t.detection_to_silence_blocks for t in trials if t.detection_to_silence_blocks is not None]
    bump_ms = [t.bump_to_silence_ms for t in trials if t.bump_to_silence_ms is not None]
    bump_blocks = [t.bump_to_silence_blocks for t in trials if t.bump_to_silence_blocks is not None]
    confirm_ms = [t.detection_to_bump_ms for t in trials if t.detection_to_bump_ms is not None]
    first_audio = [r.first_chunk_ms for r in synth_results if r.first_chunk_ms is not None]
    first_sound = [t.say_to_first_sound_ms for t in trials if t.say_to_first_sound_ms is not None]
    late = [b.late_ms for b in speaker.blocks]
    d, b, bb, c = (summarize(v, (50, 95)) for v in (det_ms, det_blocks, bump_ms, bump_blocks))
    fa, fs, cf, sl = (summarize(v, (50, 95)) for v in (first_audio, first_sound, confirm_ms, late))
    block_ms = SPEAKER_BLOCK * 1000.0 / playback.sample_rate
    return {
        "barge_ins": len(trials),
        "mode": mode,
        "seed": seed,
        "interrupted": sum(t.outcome == "interrupted" for t in trials),
        "resumed": sum(t.outcome == "resumed" for t in trials),
        "missed": sum(t.outcome == "missed" for t in trials),
        "interrupt_to_silence_ms_p50": d["p50"],
        "interrupt_to_silence_ms_p95": d["p95"],
        "interrupt_to_silence_ms_max": d["max"],
        "interrupt_to_silence_ms_min": d["min"],
        "interrupt_to_silence_blocks_p50": b["p50"],
        "interrupt_to_silence_blocks_p95": b["p95"],
        "interrupt_to_silence_blocks_max": b["max"],
        "bump_to_silence_ms_p50": bb["p50"],
        "bump_to_silence_ms_p95": bb["p95"],
        "bump_to_silence_ms_max": bb["max"],
        "bump_to_silence_blocks_p50": c["p50"],
        "bump_to_silence_blocks_p95": c["p95"],
        "bump_to_silence_blocks_max": c["max"],
        "detection_to_bump_ms_p50": cf["p50"],
        "detection_to_bump_ms_max": cf["max"],
        "target_p95_ms": TARGET_P95_MS,
        "target_met": d["p95"] is not None and d["p95"] <= TARGET_P95_MS,
        "late_chunks_discarded": playback.stats.discarded_stale,
        "chunks_dropped_too_old": playback.stats.discarded_late,
        "audible_blocks_after_silence": sum(t.audible_blocks_after_silence for t in trials),
        "tts_first_audio_ms_p50": fa["p50"],
        "tts_first_audio_ms_max": fa["max"],
        "say_to_first_sound_ms_p50": fs["p50"],
        "say_to_first_sound_ms_max": fs["max"],
        "playback_underruns": playback.stats.underruns,
        "speaker_blocks": len(speaker.blocks),
        "speaker_late_ms_p95": sl["p95"],
        "speaker_late_ms_max": sl["max"],
        "speaker_block": {"frames": SPEAKER_BLOCK, "rate": playback.sample_rate, "ms": round(block_ms, 2)},
        "mic_block": {"frames": MIC_BLOCK, "rate": SAMPLE_RATE, "ms": MIC_BLOCK * 1000.0 / SAMPLE_RATE},
        "wall_s": round(wall_s, 1),
        "trials": [t.__dict__ for t in trials],
    }


def print_report(result: dict) -> None:
    """The human-readable summary: medians with spread (min..max), then the tail and the counters."""
    from agent_runtime.benchmarks.measure import Timing

    def line(label, key_ms, key_blocks=None):
        values = [t[key_ms] for t in result["trials"] if t[key_ms] is not None]
        if not values:
            print(f"{label}: n/a")
            return
        blocks = ""
        if key_blocks:
            bl = [t[key_blocks] for t in result["trials"] if t[key_blocks] is not None]
            blocks = f"; blocks p50 {percentile(bl, 50):.0f}, p95 {percentile(bl, 95):.0f}, max {max(bl)}"
        p95 = percentile(values, 95)
        print(f"{label}: {Timing([v / 1000.0 for v in values]).ms()}, p95 {p95:.1f} ms{blocks}")

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
