"""`replay --video`: H.264 (.mp4) or VP9 (.webm) through PyAV, what browsers play; without PyAV, OpenCV's mp4v with a
one-line note. The file opens with the frames written and the codec reported."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import pytest

from agent_runtime.recording.recording import Recording
from agent_runtime.recording.video import write_video

SAMPLE = Path(__file__).resolve().parent.parent / "recordings" / "sample"
FRAMES = 24


def _frames_and_codec(path: Path) -> tuple[int, str]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sum(1 for _ in container.decode(stream)), stream.codec_context.name


@pytest.mark.parametrize("suffix,codec", [(".mp4", "h264"), (".webm", "vp9")])
def test_pyav_writes_a_codec_browsers_play(tmp_path, suffix, codec):
    pytest.importorskip("av")
    notes: list[str] = []
    result = write_video(Recording.open(SAMPLE), tmp_path / f"replay{suffix}", max_frames=FRAMES, notify=notes.append)
    assert result["codec"] == codec and result["frames"] == FRAMES and notes == []
    assert _frames_and_codec(tmp_path / f"replay{suffix}") == (FRAMES, codec)
    width, height = result["size"]
    assert width % 2 == 0 and height % 2 == 0  # yuv420p needs even sizes


def test_without_pyav_opencv_writes_mp4v_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` raises ImportError
    notes: list[str] = []
    out = tmp_path / "replay.mp4"
    result = write_video(Recording.open(SAMPLE), out, max_frames=FRAMES, notify=notes.append)
    assert result["codec"] == "mpeg4" and len(notes) == 1 and "browsers do not play" in notes[0]
    cap = cv2.VideoCapture(str(out))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == FRAMES
    cap.release()
