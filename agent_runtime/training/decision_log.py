"""The DAgger data set on disk: one JSON line per decision, one per finished episode, and a manifest.

decisions.jsonl holds per decision the exact tokens the action view read (what a plain model would read), the
model's command and the expert's label for the same frame; notes.jsonl per Thinker paragraph the tokens the
Thinker's view read and the planner's note for it; remarks.jsonl (collect --remarks) per remark the tokens its view
read and the describer's remark for it; episodes.jsonl a line per complete episode, with the byte lengths they all
had then. All are append-only and flushed per line, so a killed run leaves readable files; a resumed run cuts them
back to the last complete episode and plays that one again.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agent_runtime.atomic_write import write_json_atomic
from agent_runtime.errors import UserError, first_line

FORMAT_VERSION = 1
DECISIONS = "decisions.jsonl"
NOTES = "notes.jsonl"
REMARKS = "remarks.jsonl"
EPISODES = "episodes.jsonl"
MANIFEST = "manifest.json"
IDENTITY_KEYS = ("scenario", "model_id", "model_weight_hash", "adapter")  # a resumed run must match these


@dataclass
class Decision:
    """One decisions.jsonl line, its keys in this order."""

    episode: int
    frame_tic: int
    chosen: str  # the model's command (button name or NOOP)
    label: str  # the expert's command for the same frame
    label_tics: int
    tokens: list[int]
    isolated: list[list[int]] | None = None  # View.isolated_spans(): blocks whose tokens attended only each other
    blocks: list[list] | None = None  # View.block_layout(): [label, length] of each block (read_act_view)

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in vars(self).items() if k not in ("isolated", "blocks") or v is not None})


@dataclass
class NoteExample:
    """One notes.jsonl line, its keys in this order: a Thinker paragraph and what the planner would write in it."""

    episode: int
    frame_tic: int | None  # the newest frame the view held (None: none yet)
    tokens: list[int]  # the Thinker's view as the paragraph started
    prompt: list[int]  # the paragraph's prompt ("\nThought:")
    target: list[int]  # the planner's note, ending in a newline: what the model learns to write after the prompt
    note: str
    written_by: str  # who wrote the paragraph the other streams read: "planner" (forced) or "model"
    isolated: list[list[int]] | None = None

    to_json = Decision.to_json


@dataclass
class RemarkExample:
    """One remarks.jsonl line, its keys in this order: a remark's view and what the describer would say there."""

    episode: int
    frame_tic: int  # the newest frame the view held
    tokens: list[int]  # the remark's view as it started
    prompt: list[int]  # the remark's prompt ("\nSay:")
    target: list[int]  # the describer's remark, ending in a newline: what the model learns to say after the prompt
    remark: str
    isolated: list[list[int]] | None = None

    to_json = Decision.to_json


# per file: the episodes.jsonl key of its length at each complete episode (a data set from before notes or remarks:
# none)
LENGTH_KEYS = {DECISIONS: "decisions_bytes", NOTES: "notes_bytes", REMARKS: "remarks_bytes"}
FILE_OF = {Decision: DECISIONS, NoteExample: NOTES, RemarkExample: REMARKS}


def read_episodes(directory: str | Path) -> list[dict]:
    """The data set's complete episodes: where a resumed run goes on (a torn last line, a kill mid-write, left out)."""
    path = Path(directory) / EPISODES
    if not path.is_file():
        return []
    out, lines = [], path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            out.append(json.loads(raw))
        except ValueError as e:
            if number == len(lines):  # the last line, cut short
                break
            raise UserError(f"{path}:{number}: not valid JSON ({first_line(e)}); the data set is damaged") from None
    return out


class DecisionLog:
    """Appends decisions and finished episodes to DIR; opening an existing DIR resumes it."""

    def __init__(self, directory: Path, manifest: dict):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._check_manifest(manifest)
        self.episodes = read_episodes(self.dir)
        self._files = {}
        for name, key in LENGTH_KEYS.items():
            keep = self.episodes[-1].get(key, 0) if self.episodes else 0
            path = self.dir / name
            if path.exists() and path.stat().st_size > keep:
                os.truncate(path, keep)  # drop the unfinished episode's lines
            self._files[name] = open(path, "ab")
        self._episodes = open(self.dir / EPISODES, "a")

    def _check_manifest(self, manifest: dict) -> None:
        path = self.dir / MANIFEST
        if path.is_file():
            try:
                old = json.loads(path.read_text())
            except ValueError as e:
                raise UserError(f"{path}: not valid JSON ({first_line(e)})") from None
            for key in IDENTITY_KEYS:
                if old.get(key) != manifest.get(key):
                    raise UserError(f"{self.dir} holds data collected with {key} {old.get(key)!r}, not "
                                    f"{manifest.get(key)!r}; resume with the same settings or pick another --out")
            return
        write_json_atomic(path, {"format_version": FORMAT_VERSION, **manifest})

    @property
    def next_episode(self) -> int:
        return len(self.episodes)

    def add(self, item: Decision | NoteExample | RemarkExample) -> None:
        f = self._files[FILE_OF[type(item)]]
        f.write(item.to_json().encode() + b"\n")
        f.flush()

    def finish_episode(self, summary: dict) -> None:
        for f in self._files.values():
            f.flush()
            os.fsync(f.fileno())
        entry = {**summary, **{key: self._files[name].tell() for name, key in LENGTH_KEYS.items()}}
        self._episodes.write(json.dumps(entry) + "\n")
        self._episodes.flush()
        os.fsync(self._episodes.fileno())
        self.episodes.append(entry)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._episodes.close()


def complete_bytes(directory: str | Path, name: str = DECISIONS) -> bytes:
    """decisions.jsonl (or notes.jsonl, remarks.jsonl) up to the end of the last complete episode (what a data set
    holds for good; a data set from before notes or remarks holds none of them)."""
    directory = Path(directory)
    if not (directory / MANIFEST).is_file():
        raise UserError(f"{directory}: not a data set (no {MANIFEST}); make one with `agent-runtime collect`")
    episodes = read_episodes(directory)
    end = episodes[-1].get(LENGTH_KEYS[name], 0) if episodes else 0
    if not end:
        return b""
    with open(directory / name, "rb") as f:
        return f.read(end)


def parse_decisions(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]
