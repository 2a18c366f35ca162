"""events.jsonl: the session's events, one JSON object a line, appended and flushed as they happen.

A killed process leaves at most its last line cut short: the reader accepts that with a warning, but a bad line
anywhere else is corruption (a UserError naming the file and the line).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_runtime.errors import UserError
from agent_runtime.events import Event

EVENTS_FILE = "events.jsonl"

# Event field -> accepted JSON types (None = null allowed).
_FIELDS: dict[str, tuple] = {
    "seq": (int,), "session": (str,), "stream": (str,), "generation": (int,), "kind": (str,),
    "tic": (int, None), "t_mono": (int, float), "t_wall": (int, float), "clock": (str,),
    "sim_ms": (int, float, None), "payload": (dict,),
}


def _jsonable(value: Any) -> Any:
    """Payloads may carry numpy scalars/arrays, paths or tuples; store what JSON can hold."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def _finite(value: Any) -> Any:
    """NaN/inf are not JSON; write them as null so every line stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode_event(event: Event | Mapping[str, Any]) -> str:
    data = event.to_dict() if isinstance(event, Event) else dict(event)
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False, default=_jsonable)
    except ValueError:  # NaN or inf somewhere
        return json.dumps(_finite(json.loads(json.dumps(data, default=_jsonable))), separators=(",", ":"))


class EventLogWriter:
    """An EventBus sink that appends one line per event, unbuffered, so a killed process loses nothing; a failed
    write is reported to the guard and ends the log there. fsync_every=N also forces it to disk every N events
    (survives a power cut, a few ms each). Thread-safe: several threads emit."""

    def __init__(self, path: str | Path, *, fsync_every: int | None = None, guard=None):
        """guard: a WriteGuard that a failed write is reported to (the log then stops writing); None: raise."""
        self.path = Path(path)
        self.guard = guard
        if fsync_every is not None and fsync_every < 1:
            raise ValueError("fsync_every must be >= 1 or None")
        self.fsync_every = fsync_every
        try:  # unbuffered: a failed write leaves nothing behind to be flushed later
            self._file = open(self.path, "ab", buffering=0)
        except OSError as e:
            raise UserError(f"cannot write event log {self.path}: {e.strerror or e}") from None
        self._lock = threading.Lock()
        self.n_written = 0

    def write(self, event: Event | Mapping[str, Any]) -> None:
        line = (encode_event(event) + "\n").encode("utf-8")
        with self._lock:
            if self._file.closed or (self.guard is not None and self.guard.failed):
                return  # emitted during shutdown, after the log was closed, or after a failed write: dropped
            try:
                self._write_all(line)
                if self.fsync_every and (self.n_written + 1) % self.fsync_every == 0:
                    os.fsync(self._file.fileno())
            except OSError as e:
                if self.guard is None:
                    raise
                self.guard.report(self.path, e)  # the rest of a line cut short stays unwritten
                return
            self.n_written += 1

    def _write_all(self, data: bytes) -> None:
        """One line, in as many write() calls as the OS needs; a failure raises with the part written on disk."""
        view = memoryview(data)
        while view:
            view = view[self._file.write(view):]

    def close(self) -> None:
        with self._lock:
            if self._file.closed:
                return
            try:
                os.fsync(self._file.fileno())
            except OSError:
                pass
            self._file.close()


def _decode_line(raw: bytes) -> Event | str:
    """An Event, or the reason the line is not one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except RecursionError:
        return "JSON nested too deeply"
    except ValueError as e:  # JSONDecodeError, and ints too long to convert
        return f"not valid JSON ({str(e).splitlines()[0] if str(e) else 'bad value'})"
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kinds in _FIELDS.items():
        if key not in data:
            return f"missing key '{key}'"
        value = data[key]
        ok = (value is None and None in kinds) or (
            not isinstance(value, bool) and any(k is not None and isinstance(value, k) for k in kinds)
        )
        if not ok:
            return f"bad type for '{key}'"
    return Event(**{key: data[key] for key in _FIELDS})


def parse_event_log(data: bytes, source: str = EVENTS_FILE) -> tuple[list[Event], list[str]]:
    """Events and warnings from the bytes of an event log; raises UserError (only) on corruption."""
    if not isinstance(data, (bytes, bytearray)):
        raise UserError(f"{source}: expected bytes")
    lines = bytes(data).split(b"\n")
    complete_last = lines[-1] == b""  # the file ends with a newline
    if complete_last:
        lines.pop()
    events: list[Event] = []
    problems: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip(b" \t\r"):
            continue  # blank lines carry nothing
        result = _decode_line(raw)
        if isinstance(result, Event):
            events.append(result)
            continue
        is_cut_short = number == len(lines) and not complete_last
        if is_cut_short or (number == len(lines) and not raw.strip(b"\x00")):
            problems.append(f"{source}: line {number} is truncated ({result}); ignored it, "
                            f"the process was probably stopped while writing it")
            continue
        raise UserError(f"{source}: line {number} is corrupt: {result}")
    return events, problems


def read_event_log(path: str | Path) -> tuple[list[Event], list[str]]:
    """(events, warnings) of an events.jsonl."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: event log not found") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read event log: {e.strerror or e}") from None
    return parse_event_log(data, str(path))

