"""The event log: one flushed line per event, a truncated last line tolerated, corruption elsewhere a UserError."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.errors import UserError
from agent_runtime.session.events import Event, EventBus
from agent_runtime.recording.event_log import EventLogWriter, parse_event_log, read_event_log
from agent_runtime.recording.manifest import FORMAT_VERSION, Manifest
from agent_runtime.recording.wav_writer import WavWriter

KEYS = {"seq", "session", "stream", "generation", "kind", "tic", "t_mono", "t_wall", "clock", "sim_ms", "payload"}


def _bus_with_log(path, **kw):
    bus = EventBus("s1", clock="fixed_cost")
    writer = EventLogWriter(path, **kw)
    bus.sinks.append(writer)
    return bus, writer


def test_each_event_is_one_line_readable_before_close(tmp_path):
    path = tmp_path / "events.jsonl"
    bus, writer = _bus_with_log(path)
    bus.emit("frame_read", "engine", tic=10, sim_ms=285.7, screen_hash="ab" * 8)
    bus.emit("action_executed", "executor", generation=2, tic=12, action="ATTACK", value=np.float32(0.5))
    lines = path.read_text().splitlines()  # flushed: visible without close
    assert len(lines) == 2
    assert set(json.loads(lines[0])) == KEYS
    events, problems = read_event_log(path)
    assert problems == []
    assert [e.to_dict() for e in events[:1]] == [bus.events[0].to_dict()]
    assert events[1].payload == {"action": "ATTACK", "value": 0.5} and events[1].generation == 2
    writer.close()
    bus.emit("token", "thinker", tic=13)  # after close: dropped, not an exception
    assert len(read_event_log(path)[0]) == 2


def test_nan_and_odd_payloads_stay_strict_json(tmp_path):
    path = tmp_path / "events.jsonl"
    bus, writer = _bus_with_log(path)
    bus.emit("engine_step", "engine", sim_ms=float("nan"), arr=np.arange(3), obj=object(), bad=float("inf"))
    writer.close()
    line = path.read_text().strip()
    data = json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert data["sim_ms"] is None and data["payload"]["arr"] == [0, 1, 2] and data["payload"]["bad"] is None


def test_concurrent_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    bus, writer = _bus_with_log(path)
    long_text = "x" * 5000

    def emit_many(stream):
        for i in range(200):
            bus.emit("token", stream, tic=i, text=long_text)

    threads = [threading.Thread(target=emit_many, args=(f"s{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    assert len(read_event_log(path)[0]) == 800


def _log_bytes(n=3) -> bytes:
    events = [Event(i, "s", "engine", 0, "frame_read", i, 1.0 + i, 2.0 + i, "compute", None, {"i": i}) for i in range(n)]
    return b"".join(json.dumps(e.to_dict()).encode() + b"\n" for e in events)


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    data = _log_bytes(3)
    path = tmp_path / "events.jsonl"
    path.write_bytes(data[:-15])  # cut inside the last line
    events, problems = read_event_log(path)
    assert [e.seq for e in events] == [0, 1] and len(problems) == 1 and "line 3 is truncated" in problems[0]
    path.write_bytes(data[:-1])  # only the final newline missing: the line is complete
    events, problems = read_event_log(path)
    assert len(events) == 3 and problems == []


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    lines = _log_bytes(4).split(b"\n")
    lines[1] = lines[1][:20]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UserError, match=r"events\.jsonl: line 2 is corrupt"):
        read_event_log(path)


def test_complete_but_invalid_last_line_is_corruption():
    data = _log_bytes(2) + b'{"seq": 1}\n'
    with pytest.raises(UserError, match="line 3 is corrupt: missing key"):
        parse_event_log(data)


def test_missing_log_is_user_error(tmp_path):
    with pytest.raises(UserError, match="event log not found"):
        read_event_log(tmp_path / "nope.jsonl")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400) | st.text(max_size=300).map(str.encode))
def test_fuzz_reader_raises_only_user_error(data):
    try:
        events, problems = parse_event_log(data, "fuzz.jsonl")
    except UserError as e:
        assert "fuzz.jsonl: line " in str(e) and "\n" not in str(e)
        return
    assert all(isinstance(e, Event) for e in events)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=5), st.data())
def test_fuzz_any_cut_of_a_valid_log_reads_its_prefix(n, data):
    full = _log_bytes(n)
    cut = data.draw(st.integers(min_value=0, max_value=len(full)))
    events, problems = parse_event_log(full[:cut])
    complete = full[:cut].count(b"\n")
    assert [e.seq for e in events][:complete] == list(range(complete))
    assert len(events) in (complete, complete + 1) and len(problems) <= 1


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=10))
def test_fuzz_any_json_line_in_the_middle(value):
    data = _log_bytes(1) + json.dumps(value).encode() + b"\n" + _log_bytes(1)
    try:
        parse_event_log(data)
    except UserError as e:
        assert "line 2 is corrupt" in str(e)


def test_manifest_roundtrip_and_unknown_version(tmp_path):
    from agent_runtime.config import RunConfig

    config = RunConfig(seed=5, model={"threads": 1})
    manifest = Manifest.build(config, model_id="smollm2-135m", model_weight_hash="ab12")
    path = tmp_path / "manifest.json"
    manifest.write(path)
    back = Manifest.read(path)
    assert back == manifest and back.format_version == FORMAT_VERSION and back.seeds == {"run": 5}
    assert {"vizdoom", "torch", "transformers", "numpy", "python"} <= set(back.packages)
    assert back.scenario == "defend_the_center" and back.clock == "sync" and back.threads == 1
    data = json.loads(path.read_text())
    data["format_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"manifest\.json: unknown format_version 99"):
        Manifest.read(path)
    path.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        Manifest.read(path)


def test_wav_is_readable_before_close_and_after(tmp_path):
    import wave

    path = tmp_path / "mic_in.wav"
    writer = WavWriter(path, 16000)
    for _ in range(5):
        writer.write(np.sin(np.linspace(0, 20, 480)).astype(np.float32))
    with wave.open(str(path), "rb") as w:  # as a crash would leave it: header already true
        assert w.getnframes() == 2400 and w.getframerate() == 16000 and w.getsampwidth() == 2
    writer.write(np.zeros(100, np.int16))
    writer.close()
    with wave.open(str(path), "rb") as w:
        assert w.getnframes() == 2500 and writer.n_frames == 2500
