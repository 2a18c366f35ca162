"""A video of a recording: the .lmp replayed frame by frame, with what the agent did and said at that tic.

Events without a tic (audio) take the tic of the event before them. Encoded in a codec browsers play (.mp4: H.264,
.webm: VP9) through PyAV (the [video] extra; FFmpeg in its wheel), else what OpenCV's own FFmpeg has.
"""

import textwrap
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agent_runtime import signals
from agent_runtime.session.clocks import TICS_PER_SECOND
from agent_runtime.errors import UserError
from agent_runtime.notices import Notify, warning_line
from agent_runtime.optional import require
from agent_runtime.session.events import Event, Kind
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.replay_check import replayed_frames
from agent_runtime.recording.timeline import event_text

FENCED_SHOWN_TICS = TICS_PER_SECOND  # fenced actions stay on screen for a second
SCALE = 4  # video pixels per game pixel (nearest neighbour: the game's own pixels stay sharp)
PANEL_LINES = 7
# kinds whose text the overlay keeps showing until the next one -> the overlay's field for it
TEXT_FIELDS = {Kind.THINKER_PARAGRAPH: "thinker", "commentary": "commentary", "tts_chunk": "commentary",
               "asr_final": "user", "user_input": "user"}
# PyAV's encoder (fast settings: a replay films in about its own time) and the codec's name: .webm VP9, else H.264
VP9 = ("libvpx-vp9", {"deadline": "realtime", "cpu-used": "8", "row-mt": "1"}, "vp9")
H264 = ("libx264", {"preset": "veryfast"}, "h264")


@dataclass
class OverlayState:
    """What the overlay shows at the current tic."""

    generation: int = 0
    action: str = ""
    action_tic: int | None = None
    fenced: list[tuple[int, str]] = field(default_factory=list)
    thinker: str = ""
    commentary: str = ""
    user: str = ""

    def apply(self, tic: int, event: Event) -> None:
        self.generation = max(self.generation, event.generation)
        text = event_text(event)
        if event.kind == Kind.ACTION_EXECUTED:
            self.action, self.action_tic = text or "?", tic
        elif event.kind == Kind.ACTION_FENCED:
            self.fenced.append((tic, text or "?"))
        elif event.kind in TEXT_FIELDS and text:
            setattr(self, TEXT_FIELDS[event.kind], text)

    def lines(self, tic: int, width_chars: int) -> list[tuple[str, tuple[int, int, int]]]:
        """(text, BGR color) rows of the panel under the game screen."""
        white, green, red, violet, yellow = (235, 235, 235), (90, 220, 90), (80, 80, 255), (230, 140, 200), (80, 220, 240)
        rows = [(f"tic {tic}  gen {self.generation}", white)]
        if self.action:
            rows.append((f"action: {self.action}" + (f" (tic {self.action_tic})" if self.action_tic is not None else ""), green))
        recent = [t for (t0, t) in self.fenced if tic - t0 <= FENCED_SHOWN_TICS]
        if recent:
            rows.append(("fenced: " + ", ".join(recent[-4:]), red))
        for label, text, color in (("think", self.thinker, violet), ("says", self.commentary, yellow),
                                   ("user", self.user, white)):
            if text:
                wrapped = textwrap.wrap(f"{label}: {' '.join(text.split())}", width_chars) or [""]
                rows += [(line, color) for line in wrapped[:2]]
        return rows[:PANEL_LINES]


def _events_by_tic(events: list[Event]) -> list[tuple[int, Event]]:
    out, last = [], 0
    for e in sorted(events, key=lambda e: e.seq):
        if e.tic is not None:
            last = e.tic
        out.append((last, e))
    out.sort(key=lambda pair: pair[0])  # stable: same-tic events keep seq order
    return out


class _AvWriter:
    """Frames encoded by PyAV in yuv420p (what browsers decode), an .mp4's index first (faststart); cv2's interface."""

    def __init__(self, out: Path, encoder: tuple[str, dict, str], size: tuple[int, int], fps: int):
        import av

        self.av, faststart = av, {"movflags": "+faststart"} if out.suffix.lower() == ".mp4" else {}
        self.container = av.open(str(out), "w", options=faststart)
        self.stream = self.container.add_stream(encoder[0], rate=fps, options=encoder[1], width=size[0],
                                                height=size[1], pix_fmt="yuv420p")

    def write(self, image: np.ndarray) -> None:
        self.container.mux(self.stream.encode(self.av.VideoFrame.from_ndarray(image, format="bgr24")))

    def release(self) -> None:
        self.container.mux(self.stream.encode(None))  # what the encoder still holds
        self.container.close()


def _open_writer(out: Path, size: tuple[int, int], fps: int, notify: Notify):
    """(writer, codec): .webm in VP9, else H.264, through PyAV; else OpenCV's VP9 or mp4v (said: browsers skip it)."""
    cv2, webm = require("cv2", "video"), out.suffix.lower() == ".webm"
    encoder = VP9 if webm else H264
    with suppress(Exception):  # PyAV not installed (the [video] extra), its FFmpeg without the encoder, or not writable
        return _AvWriter(out, encoder, size, fps), encoder[2]
    fourcc, codec = ("VP90", "vp9") if webm else ("mp4v", "mpeg4")
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*fourcc), float(fps), size)
    if not writer.isOpened():
        raise UserError(f"cannot write video {out} ({codec} codec, check the directory exists and is writable)")
    if codec == "mpeg4":
        notify(f"note: {out} is MPEG-4 part 2 (mp4v), which browsers do not play; `pip install av` gives H.264")
    return writer, codec


@signals.stoppable()
def write_video(recording: Recording, out_path: str | Path, *, max_frames: int | None = None,
                notify: Notify = warning_line) -> dict:
    """Replay the recording into out_path at the game's 35 fps; returns {"path", "frames", "fps", "size", "codec"}."""
    cv2 = require("cv2", "video")
    out, fps = Path(out_path), TICS_PER_SECOND
    pending = _events_by_tic(recording.events)
    state, cursor, n_frames, writer, size, codec = OverlayState(), 0, 0, None, None, None
    font, font_scale, line_h = cv2.FONT_HERSHEY_SIMPLEX, 0.42, 16
    try:
        with replayed_frames(recording) as frames:
            for frame in frames:
                signals.check()  # SIGINT/SIGTERM: stop between two frames (the partial video is closed)
                if max_frames is not None and n_frames >= max_frames:
                    break
                while cursor < len(pending) and pending[cursor][0] <= frame.tic:
                    state.apply(*pending[cursor])
                    cursor += 1
                screen = cv2.cvtColor(np.ascontiguousarray(frame.screen), cv2.COLOR_RGB2BGR)
                big = cv2.resize(screen, None, fx=SCALE, fy=SCALE, interpolation=cv2.INTER_NEAREST)
                panel = np.zeros((PANEL_LINES * line_h + 8, big.shape[1], 3), np.uint8)
                for i, (text, color) in enumerate(state.lines(frame.tic, max(20, big.shape[1] // 8))):
                    cv2.putText(panel, text, (6, 14 + i * line_h), font, font_scale, color, 1, cv2.LINE_AA)
                image = np.vstack([big, panel])
                if writer is None:
                    size = (image.shape[1], image.shape[0])
                    writer, codec = _open_writer(out, size, fps, notify)
                writer.write(image)
                n_frames += 1
    finally:
        if writer is not None:
            writer.release()
    if n_frames == 0:
        raise UserError(f"{recording.lmp_path}: the replay produced no frames; no video written")
    return {"path": str(out), "frames": n_frames, "fps": fps, "size": list(size), "codec": codec}
