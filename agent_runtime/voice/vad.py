"""Voice activity detection with silero (the ONNX file shipped in the silero-vad wheel, run by onnxruntime).

Why silero: webrtcvad flags stationary noise and tones as speech; silero does not, costs ~0.2 ms per
32 ms window, and reacts in ~45 ms. `SileroModel` gives a speech probability per 512-sample window;
`VoiceActivityDetector` turns the probabilities into SpeechStarted / SpeechStopped events with
hysteresis, a minimum speech duration and a hangover, on a stream of blocks of any size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.voice.audio_io import BLOCK_FRAMES as WINDOW  # samples per silero window (32 ms)
from agent_runtime.voice.audio_io import SAMPLE_RATE

CONTEXT = 64  # samples of the previous window silero expects in front of each window
WINDOW_MS = WINDOW * 1000 // SAMPLE_RATE


def silero_onnx_path() -> Path:
    """The ONNX model inside the installed silero-vad wheel (found without importing torch)."""
    spec = find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the silero-vad package is not installed; run `make install`")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise UserError(f"silero-vad is installed but {path} is missing; reinstall silero-vad")
    return path


class SileroModel:
    """Stateful silero VAD: one speech probability per 32 ms window of 16 kHz audio."""

    def __init__(self, path: str | Path | None = None):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1  # tiny model: never compete with the LM for cores
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(path or silero_onnx_path()), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)
        self._context = np.zeros((1, CONTEXT), np.float32)

    def probability(self, window: np.ndarray) -> float:
        x = np.asarray(window, np.float32).reshape(1, WINDOW)
        inp = np.concatenate([self._context, x], axis=1)
        out, self._state = self.session.run(None, {"input": inp, "state": self._state, "sr": self._sr})
        self._context = inp[:, -CONTEXT:]
        return float(out[0, 0])


@dataclass(frozen=True)
class SpeechStarted:
    """Speech began at t_ms (stream time of its first window); detected at detected_ms."""

    t_ms: float
    detected_ms: float
    wall: float


@dataclass(frozen=True)
class SpeechStopped:
    """Speech ended at t_ms (stream time just after its last speech window); detected at detected_ms."""

    t_ms: float
    detected_ms: float
    wall: float
    started_ms: float


VadEvent = SpeechStarted | SpeechStopped


@dataclass
class VadWindow:
    """One processed window: its audio, where it ends in the stream, and the VAD state after it."""

    samples: np.ndarray
    end_ms: float
    probability: float
    in_speech: bool
    event: VadEvent | None


class VoiceActivityDetector:
    """Speech start/stop events from silero probabilities, on blocks of any size.

    Hysteresis: speech starts when `min_speech_ms` of windows reach `threshold`; it stops when
    `min_silence_ms` of windows stay below `threshold - 0.15`. Stationary noise and tones stay
    below threshold with silero, so no energy gate is needed.
    """

    def __init__(self, threshold: float = 0.5, min_speech_ms: int = 64, min_silence_ms: int = 256,
                 model: SileroModel | None = None):
        self.model = model or SileroModel()
        self.threshold = threshold
        self.neg_threshold = max(0.05, threshold - 0.15)
        self.min_speech_windows = max(1, round(min_speech_ms / WINDOW_MS))
        self.min_silence_windows = max(1, round(min_silence_ms / WINDOW_MS))
        self.reset()

    def reset(self) -> None:
        self.model.reset()
        self._pending = np.zeros(0, np.float32)
        self.samples_seen = 0
        self.in_speech = False
        self._run = 0  # consecutive windows voting for a state change
        self._run_start_ms = 0.0
        self._speech_start_ms = 0.0

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

    def _step(self, window: np.ndarray) -> VadWindow:
        start_ms = self.stream_ms
        p = self.model.probability(window)
        self.samples_seen += WINDOW
        end_ms = self.stream_ms
        event: VadEvent | None = None
        if not self.in_speech:
            if p >= self.threshold:
                if self._run == 0:
                    self._run_start_ms = start_ms
                self._run += 1
                if self._run >= self.min_speech_windows:
                    self.in_speech, self._run = True, 0
                    self._speech_start_ms = self._run_start_ms
                    event = SpeechStarted(self._run_start_ms, end_ms, time.monotonic())
            else:
                self._run = 0
        else:
            if p < self.neg_threshold:
                if self._run == 0:
                    self._run_start_ms = start_ms
                self._run += 1
                if self._run >= self.min_silence_windows:
                    self.in_speech, self._run = False, 0
                    event = SpeechStopped(self._run_start_ms, end_ms, time.monotonic(), self._speech_start_ms)
            elif p >= self.threshold:
                self._run = 0
        return VadWindow(window, end_ms, p, self.in_speech, event)
