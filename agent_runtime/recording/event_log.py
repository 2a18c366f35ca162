"""events.jsonl: the session's events, one JSON object a line, appended and flushed as they happen.

A killed process leaves at most its last line cut short: the reader accepts that with a warning, but a bad line
anywhere else is corruption (a UserError naming the file and the line).
"""

import json
import math
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_runtime.errors import UserError
from agent_runtime.session.events import Event
from agent_runtime.recording.write_guard import GuardedFile, WriteGuard

EVENTS_FILE = "events.jsonl"

_EVENT = TypeAdapter(Event)


def _jsonable(value: Any) -> Any:
    """Payloads may carry numpy scalars/arrays, paths or tuples; store what JSON can hold."""
    if hasattr(value, "tolist"):  # numpy and torch, scalars included
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


def encode_event(event: Event) -> str:
    data = event.to_dict()
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False, default=_jsonable)
    except ValueError:  # NaN or inf somewhere
        return json.dumps(_finite(json.loads(json.dumps(data, default=_jsonable))), separators=(",", ":"))


class EventLogWriter(GuardedFile):
    """An EventBus sink that appends one line per event, unbuffered, so a killed process loses nothing."""

    def __init__(self, path: str | Path, *, guard: WriteGuard | None = None):
        super().__init__(path, "ab", "event log", guard)

    def write(self, event: Event) -> None:
        line = (encode_event(event) + "\n").encode("utf-8")
        self._guarded(lambda: self._write_all(line))


def _decode_line(raw: bytes) -> Event | str:
    """An Event (each field's JSON type checked: no conversions, a bool is no number), or why the line is not one."""
    try:
        return _EVENT.validate_json(raw, strict=True)
    except ValidationError as e:
        error = e.errors()[0]
        key = ".".join(map(str, error["loc"]))
        if error["type"] == "json_invalid":
            return f"not valid JSON ({error['msg'].removeprefix('Invalid JSON: ')})"
        if error["type"] == "missing":
            return f"missing key '{key}'"
        return f"bad type for '{key}'" if key else "not a JSON object"


def parse_event_log(data: bytes, source: str = EVENTS_FILE) -> tuple[list[Event], list[str]]:
    """Events and warnings from the bytes of an event log; raises UserError (only) on corruption."""
    lines = data.split(b"\n")
    complete_last = lines[-1] == b""  # the file ends with a newline
    if complete_last:
        lines.pop()
    events, problems = [], []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip(b" \t\r"):
            continue  # blank lines carry nothing
        result = _decode_line(raw)
        if isinstance(result, Event):
            events.append(result)
        elif number == len(lines) and (not complete_last or not raw.strip(b"\x00")):  # cut short, or zeros
            problems.append(f"{source}: line {number} is truncated ({result}); ignored it, "
                            f"the process was probably stopped while writing it")
        else:
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
