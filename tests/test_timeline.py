"""The swimlane timeline: every lane kind drawn from a synthetic event log, time filtering, session clock."""

from __future__ import annotations

import cv2
import pytest

from agent_runtime.errors import UserError
from agent_runtime.session.events import Event
from agent_runtime.recording.timeline import render_timeline, session_times


def synthetic_events() -> list[Event]:
    """Two seconds of a session with every kind the timeline draws, and two interruptions."""
    events: list[Event] = []
    generation = 0

    def add(kind, stream, t, *, tic=None, sim=True, **payload):
        events.append(Event(len(events), "synthetic", stream, generation, kind, tic, 100.0 + t, 1.7e9 + t,
                            "compute", t * 1000 if sim else None, payload))

    for i in range(70):
        t = i / 35
        add("frame_read", "engine", t, tic=i, screen_hash=f"{i:016x}")
        (add("frame_prefilled", "engine", t + 0.01, tic=i) if i % 3 else add("frame_dropped", "engine", t, tic=i, age_ms=300))
        add("token", "thinker", t + 0.012, tic=i, text="x")
        add("token", "actor", t + 0.014, tic=i, text="y")
        if i % 5 == 0:
            add("engine_step", "engine", t + 0.02, tic=i)
            add("action_emitted", "actor", t + 0.021, tic=i, action="TURN_LEFT")
            if i % 10 == 0:
                add("action_executed", "executor", t + 0.03, tic=i + 1, action="TURN_LEFT")
            else:
                add("action_fenced", "executor", t + 0.03, tic=i + 1, action="ATTACK", reason="generation")
        if i == 20:
            add("thinker_paragraph", "thinker", t, tic=i, text="Two imps on the left; turn and shoot.")
        if i == 25:
            add("thinker_paragraph", "thinker", t, tic=i, text=" note: 2 imps left, 14 rounds")
            add("thinker_note", "thinker", t, tic=i, text="2 imps left, 14 rounds", claims=["2 imps left", "14 rounds"],
                noise=0)
        if i == 30:
            add("asr_partial", "asr", t, sim=False, text="turn")
            add("asr_partial", "asr", t + 0.1, sim=False, text="turn right")
            add("asr_final", "asr", t + 0.2, sim=False, text="turn right")
            add("user_input", "asr", t + 0.21, text="turn right")
            generation += 1
            add("generation_bump", "engine", t + 0.22, tic=i, to=generation, reason="user command")
        if i == 40:
            add("tts_chunk", "tts", t, text="Turning right.")
            add("playback_start", "audio", t + 0.02)
        if i == 50:
            add("barge_in", "audio", t)
            generation += 1
            add("generation_bump", "engine", t + 0.01, tic=i, to=generation, reason="barge-in")
            add("playback_stop", "audio", t + 0.02)
    return events


def _read_png(path):
    image = cv2.imread(str(path))
    assert image is not None, "not a readable PNG"
    return image


def test_all_lanes_render_to_a_png(tmp_path):
    out = tmp_path / "t.png"
    drawn = render_timeline(synthetic_events(), out, title="synthetic")
    assert out.stat().st_size > 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = _read_png(out)
    assert image.shape[0] > 400 and image.shape[1] > 1000
    assert drawn["n_generation_bumps"] == 2 and drawn["n_events"] == len(synthetic_events())
    assert drawn["drawn"]["Thinker note (its claims)"] == 1 and drawn["drawn"]["Thinker paragraph"] == 2
    import matplotlib.image

    assert matplotlib.image.imread(str(out)).shape[:2] == image.shape[:2]


def test_from_to_selects_a_stretch(tmp_path):
    events = synthetic_events()
    drawn = render_timeline(events, tmp_path / "part.png", from_s=1.1, to_s=1.4)
    times = [te.t for te in session_times(events)]
    assert drawn["n_events"] == sum(1.1 <= t <= 1.4 for t in times) > 0
    assert drawn["n_generation_bumps"] == 0  # the bumps are at ~1.08 s and ~1.44 s
    assert drawn["from_s"] == 1.1 and drawn["to_s"] == 1.4
    assert "Thinker note (its claims)" not in drawn["drawn"]  # the note is at ~0.71 s
    empty = render_timeline(events, tmp_path / "empty.png", from_s=50, to_s=60)
    assert empty["n_events"] == 0 and _read_png(tmp_path / "empty.png") is not None
    with pytest.raises(UserError, match="empty time range"):
        render_timeline(events, tmp_path / "bad.png", from_s=2, to_s=1)


def test_events_without_sim_ms_follow_the_last_sim_anchor():
    events = synthetic_events()
    timed = {te.event.seq: te.t for te in session_times(events)}
    partial = next(e for e in events if e.kind == "asr_partial")
    assert partial.sim_ms is None
    assert timed[partial.seq] == pytest.approx(30 / 35, abs=0.05)
