"""What is in view, as the frame line's words: from the label buffer or from the screen, behind one interface.

`LabelEncoder` reads the game's hidden state (the label buffer: exact objects); `PixelEncoder` reads only the screen,
through the screen detector, so it plays where no label buffer exists. Both write the same words
("imp left 23 mid; ..."), in the same order, so a model reads one or the other alike.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import torch

from envs.detector_training import aim_ordered, load_detector
from envs.frame import Frame
from envs.observation_text import MAX_OBJECTS, encode_seen, object_words
from envs.screen_detector import BANDS, Detection, ScreenDetector, decode

FRAME_SOURCES = ("labels", "pixels")


class LabelEncoder:
    """The frame line from the label buffer (the engine must run with it on)."""

    source = "labels"
    needs_labels = True
    weights_hash = None

    def seen(self, frame: Frame, *, signed: bool, aim_order: bool, turned: float = 0.0) -> str:
        return encode_seen(frame, signed=signed, aim_order=aim_order, turned=turned)


class PixelEncoder:
    """The frame line from the screen alone: one detector forward per frame; `last_ms` is what the newest took."""

    source = "pixels"
    needs_labels = False

    def __init__(self, detector: ScreenDetector, weights_hash: str | None = None):
        self.detector, self.weights_hash = detector.eval(), weights_hash
        self.last_ms = 0.0
        self._cache: tuple[object, list[Detection]] | None = None  # (the screen, held, and its detections)

    def detect(self, screen) -> list[Detection]:
        """The screen's detections (one forward; the same screen asked twice is detected once)."""
        if self._cache is not None and self._cache[0] is screen:
            return self._cache[1]
        t0 = time.perf_counter()
        with torch.inference_mode():
            found = decode(self.detector(torch.from_numpy(screen)[None]), screen.shape[1], self.detector.classes)[0]
        self.last_ms = (time.perf_counter() - t0) * 1000.0
        self._cache = (screen, found)
        return found

    def seen(self, frame: Frame, *, signed: bool, aim_order: bool, turned: float = 0.0) -> str:
        found = self.detect(frame.screen)
        ordered = aim_ordered(found, turned) if aim_order else sorted(
            found, key=lambda d: (BANDS.index(d.band), round(abs(d.bearing))))
        words = [object_words(d.name, d.bearing - turned, d.band, signed=signed) for d in ordered[:MAX_OBJECTS]]
        return "; ".join(words) if words else "nothing in view"


def frame_encoder(source: str, weights: str | Path | None = None):
    """The encoder of `source` ("labels" or "pixels"); pixels loads the detector weights at `weights`
    (DetectorWeightsError, one line, when they are missing or damaged)."""
    if source == "labels":
        return LabelEncoder()
    if source != "pixels":
        raise ValueError(f"unknown frame source {source!r}; use one of: {', '.join(FRAME_SOURCES)}")
    path = Path(weights)
    detector = load_detector(path)
    return PixelEncoder(detector, hashlib.sha256(path.read_bytes()).hexdigest()[:16])
