"""Voice activity detection with silero (the ONNX file shipped in the silero-vad wheel, run by onnxruntime).

Why silero: webrtcvad takes stationary noise and tones for speech; silero does not, at ~0.2 ms a 32 ms window.
It confirms "stop" and "shoot" only ~130-190 ms after their onset, so tentative onsets (SpeechOnset: a window
at threshold, or a fricative-like rise) are reported too, for reversible actions only (a pause).
"""

from collections import deque
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.optional import missing_extra, require
from agent_runtime.voice.audio_io import BLOCK_FRAMES as WINDOW, SAMPLE_RATE  # WINDOW: samples a silero window (32 ms)

CONTEXT = 64  # samples of the previous window silero expects in front of each window
WINDOW_MS = WINDOW * 1000 // SAMPLE_RATE


def silero_onnx_path() -> Path:
    """The ONNX model inside the installed silero-vad wheel (found without importing torch)."""
    spec = find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise missing_extra("silero_vad", "voice")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise UserError(f"silero-vad is installed but {path} is missing; reinstall silero-vad")
    return path


@dataclass(frozen=True)
class SpeechStarted:
    """Speech began at t_ms (stream time of its first window); detected at detected_ms."""

    t_ms: float
    detected_ms: float


@dataclass(frozen=True)
class SpeechOnset:
    """Speech may have begun (not yet confirmed by SpeechStarted), cue "vad" or "fricative" (FricativeOnset)."""

    t_ms: float
    detected_ms: float
    cue: str


@dataclass(frozen=True)
class OnsetRejected:
    """A tentative onset (started at onset_ms) came to nothing: quiet again, or no SpeechStarted in time."""

    onset_ms: float
    detected_ms: float
    reason: str  # "quiet" | "timeout"


@dataclass(frozen=True)
class SpeechStopped:
    """Speech ended at t_ms (stream time just after its last speech window); detected at detected_ms."""

    t_ms: float
    detected_ms: float
    started_ms: float


VadEvent = SpeechStarted | SpeechStopped
OnsetEvent = SpeechOnset | OnsetRejected


@dataclass
class VadWindow:
    """One processed window: its audio, where it ends in the stream, and the VAD event it gave (`onset`: a
    tentative onset opened or rejected in this window, reported before `event`)."""

    samples: np.ndarray
    end_ms: float
    event: VadEvent | None
    onset: OnsetEvent | None = None
    quiet_ms: float = 0.0  # in speech: how long it has been quiet up to this window (a pause, or the end coming)


class FricativeOnset:
    """A rise of the level that sounds like a fricative or a burst ("s", "sh", "t"): `rise_db` above the noise
    floor (the quietest window of ~1.5 s), noise-like (spectral flatness: fricatives ~0.15-0.6, vowels, tones and
    hum ~0) and high (`min_high` of its power above 2 kHz: fricatives 0.85-1, rumble ~0.1)."""

    rise_db, min_level_db, min_flatness, min_high = 15.0, -45.0, 0.1, 0.5
    floor_windows, min_history = 47, 8  # the floor's span, and the windows it needs first
    low_bin, high_bin = 4, 2000 * WINDOW // SAMPLE_RATE  # FFT bins: below ~125 Hz left out (DC, hum); at 2 kHz

    def __init__(self):
        self._taper = np.hanning(WINDOW).astype(np.float32)
        self.reset()

    def reset(self) -> None:
        self._levels: deque[float] = deque(maxlen=self.floor_windows)
        self._above = False
        self.loud = False  # the newest window is well above the floor (whatever it sounds like)

    def step(self, window: np.ndarray) -> bool:
        """Feed one window; True when it is a fricative-like rise."""
        level = 10.0 * float(np.log10(np.mean(np.square(window, dtype=np.float64)) + 1e-12))
        floor = min(self._levels) if len(self._levels) >= self.min_history else None
        self._levels.append(level)
        self.loud = floor is not None and level >= max(floor + self.rise_db, self.min_level_db)
        rise = self.loud and not self._above
        self._above = self.loud
        if not rise:
            return False
        power = np.square(np.abs(np.fft.rfft(window * self._taper)))[self.low_bin:] + 1e-20
        flatness = float(np.exp(np.mean(np.log(power))) / np.mean(power))
        high = float(power[self.high_bin - self.low_bin:].sum() / power.sum())
        return flatness >= self.min_flatness and high >= self.min_high


class VoiceActivityDetector:
    """Speech start/stop events from silero probabilities, on blocks of any size.

    Speech starts when `min_speech_ms` of windows reach `threshold` and stops after `min_silence_ms` below
    `threshold - 0.15` (silero keeps noise and tones below threshold: no energy gate). A tentative onset is
    rejected after `onset_quiet_ms` quiet or `onset_timeout_ms` without SpeechStarted ("stop" needs ~240 ms)."""

    threshold, neg_threshold = 0.5, 0.5 - 0.15
    min_speech_ms, min_silence_ms, onset_quiet_ms, onset_timeout_ms = 64, 256, 128, 320  # the first 3: whole windows

    def __init__(self):
        ort = require("onnxruntime", "voice")
        opts = ort.SessionOptions()
        opts.inter_op_num_threads = opts.intra_op_num_threads = 1  # tiny model: never compete with the LM for cores
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(silero_onnx_path()), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self.fricative = FricativeOnset()
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)  # silero's, carried from window to window
        self._context, self._pending = np.zeros((1, CONTEXT), np.float32), np.zeros(0, np.float32)
        self.samples_seen, self.in_speech = 0, False
        self._run = 0  # consecutive windows voting for a state change
        self.quiet_windows = 0  # in speech: windows in a row below neg_threshold
        self._run_start_ms = self._speech_start_ms = 0.0
        self.fricative.reset()
        self._onset_ms: float | None = None  # an open tentative onset (stream time of its first window)
        self._onset_vad, self._quiet = False, 0  # it has had its "vad" cue; quiet windows since

    @property
    def stream_ms(self) -> float:
        return self.samples_seen * 1000.0 / SAMPLE_RATE

    def process(self, block: np.ndarray) -> list[VadWindow]:
        """Feed a block (any length, 16 kHz mono); returns the windows completed by it."""
        x = np.asarray(block, np.float32).reshape(-1)
        self._pending = np.concatenate([self._pending, x]) if self._pending.size else x
        out = []
        while self._pending.size >= WINDOW:
            window, self._pending = self._pending[:WINDOW], self._pending[WINDOW:]
            out.append(self._step(window))
        return out

    def _probability(self, window: np.ndarray) -> float:
        """silero's speech probability for one 32 ms window (after the previous one)."""
        inp = np.concatenate([self._context, window.reshape(1, WINDOW)], axis=1)
        out, self._state = self.session.run(None, {"input": inp, "state": self._state,
                                                   "sr": np.array(SAMPLE_RATE, np.int64)})
        self._context = inp[:, -CONTEXT:]
        return float(out[0, 0])

    def _step(self, window: np.ndarray) -> VadWindow:
        start_ms, p, fricative = self.stream_ms, self._probability(window), self.fricative.step(window)
        self.samples_seen += WINDOW
        end_ms = self.stream_ms
        event: VadEvent | None = None
        onset: OnsetEvent | None = None
        if not self.in_speech:
            if p < self.threshold:
                self._run = 0
            elif self._vote(start_ms, self.min_speech_ms // WINDOW_MS):
                self.in_speech, self._speech_start_ms = True, self._run_start_ms
                event = SpeechStarted(self._run_start_ms, end_ms)
            if event is None:
                onset = self._tentative(p, fricative, start_ms, end_ms)
            else:
                self._onset_ms = None  # the tentative onset, if any, is confirmed
        elif p < self.neg_threshold:
            self.quiet_windows += 1
            if self._vote(start_ms, self.min_silence_ms // WINDOW_MS):
                self.in_speech = False
                event = SpeechStopped(self._run_start_ms, end_ms, self._speech_start_ms)
        else:
            self.quiet_windows = 0
            if p >= self.threshold:
                self._run = 0
        if not self.in_speech:
            self.quiet_windows = 0
        return VadWindow(window, end_ms, event, onset, self.quiet_windows * WINDOW_MS)

    def _vote(self, start_ms: float, needed: int) -> bool:
        """One more window in a row voting for a state change; True (the run starts over) once `needed` did."""
        if self._run == 0:
            self._run_start_ms = start_ms
        self._run = (self._run + 1) % needed
        return self._run == 0

    def _tentative(self, p: float, fricative: bool, start_ms: float, end_ms: float) -> OnsetEvent | None:
        """Open, cue or reject a tentative onset, in a window outside speech that did not start it."""
        vad_cue = p >= self.threshold
        if self._onset_ms is None:
            if not (vad_cue or fricative):
                return None
            self._onset_ms, self._onset_vad, self._quiet = start_ms, vad_cue, 0
            return SpeechOnset(start_ms, end_ms, "vad" if vad_cue else "fricative")
        if vad_cue and not self._onset_vad:
            self._onset_vad, self._quiet = True, 0
            return SpeechOnset(start_ms, end_ms, "vad")
        self._quiet = 0 if (vad_cue or self.fricative.loud) else self._quiet + 1
        reason = ("quiet" if self._quiet >= self.onset_quiet_ms // WINDOW_MS
                  else "timeout" if end_ms - self._onset_ms >= self.onset_timeout_ms else None)
        if reason is None:
            return None
        onset_ms, self._onset_ms = self._onset_ms, None
        return OnsetRejected(onset_ms, end_ms, reason)
