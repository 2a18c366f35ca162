"""Per-event voice latency metrics, computed in stream time plus measured processing time.

Stream-time arithmetic makes file runs (faster than real time) report what a live run would see:
a hypothesis about audio up to t_ms, produced audio_age_ms after that audio arrived, is available
(t_ms - reference_ms) + audio_age_ms after the reference point in a real-time stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agent_runtime.voice.barge_in import BargeInRecord
from agent_runtime.voice.playback import PlaybackStats
from agent_runtime.voice.recognizer import Hypothesis
from agent_runtime.voice.tts import SynthesisResult
from agent_runtime.voice.vad import SpeechStarted, SpeechStopped


@dataclass
class VoiceMetrics:
    """Collects one value per event under a metric name; `summary()` gives count/mean/p50/p95/max."""

    events: dict[str, list[float]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self._speech_start: dict[int, float] = {}
        self._partial_seen: set[int] = set()
        self._utterance = 0

    def record(self, name: str, value: float) -> None:
        self.events.setdefault(name, []).append(float(value))

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    # ------------------------------------------------------------------ listening

    def observe_frames(self, frames: list) -> None:
        """Frames from ListeningPipeline.push: VAD events and hypotheses."""
        for f in frames:
            if isinstance(f, SpeechStarted):
                self.record("vad_onset_delay_ms", f.detected_ms - f.t_ms)
                self.count("utterances")
            elif isinstance(f, SpeechStopped):
                self.record("vad_offset_delay_ms", f.detected_ms - f.t_ms)
            elif isinstance(f, Hypothesis):
                self.record("hypothesis_audio_age_ms", f.audio_age_ms)
                start = f.speech_start_ms
                if not f.final and f.utterance not in self._partial_seen and start is not None:
                    self._partial_seen.add(f.utterance)
                    self.record("speech_start_to_first_partial_ms", f.t_ms - start + f.audio_age_ms)
                if f.final and f.speech_end_ms is not None:
                    self.record("speech_end_to_final_ms", f.t_ms - f.speech_end_ms + f.audio_age_ms)
                    self.count("finals")

    # ------------------------------------------------------------------ speaking

    def observe_synthesis(self, result: SynthesisResult) -> None:
        if result.first_chunk_ms is not None:
            self.record("tts_first_audio_ms", result.first_chunk_ms)
        if result.samples:
            self.record("tts_real_time_factor", result.real_time_factor)
        if result.aborted:
            self.count("tts_aborted")

    def observe_playback(self, stats: PlaybackStats) -> None:
        self.counters["playback_underruns"] = stats.underruns
        self.counters["playback_discarded_stale"] = stats.discarded_stale
        self.counters["playback_discarded_late"] = stats.discarded_late
        self.counters["playback_blocks"] = stats.blocks
        self.events["playback_max_depth_ms"] = [stats.max_depth_ms]
        self.events["interruption_to_silence_blocks"] = [
            r["silent_after_blocks"] for r in stats.interruptions if r["silent_after_blocks"] is not None]
        self.events["interruption_to_silence_ms"] = [
            r["silence_ms"] for r in stats.interruptions if r["silence_ms"] is not None]

    def observe_barge_in(self, records: list[BargeInRecord]) -> None:
        self.counters["barge_in_interrupted"] = sum(r.outcome == "interrupted" for r in records)
        self.counters["barge_in_resumed"] = sum(r.outcome == "resumed" for r in records)
        self.events["barge_in_detection_to_bump_ms"] = [
            r.detection_to_bump_ms for r in records if r.detection_to_bump_ms is not None]

    # ------------------------------------------------------------------ report

    def summary(self) -> dict:
        out: dict = {}
        for name, values in self.events.items():
            if not values:
                continue
            v = np.asarray(values, float)
            out[name] = {"count": int(v.size), "mean": round(float(v.mean()), 3),
                         "p50": round(float(np.percentile(v, 50)), 3),
                         "p95": round(float(np.percentile(v, 95)), 3), "max": round(float(v.max()), 3)}
        out.update(self.counters)
        return out
