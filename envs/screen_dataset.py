"""Screens with the objects the label buffer says are on them: the screen detector's data set, on disk.

One shard per played episode (`shard-<scenario>-<policy>-s<seed>.npz`): the kept screens and, per object on each,
its short name, world bearing, distance and label box, and its place in the frame line's order. A shard is written
whole to a temporary name and renamed, so a killed collection leaves only whole shards and goes on from them; the
data set's hash is over the shards' bytes, so a trained detector names exactly what it learned from.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envs.frame import Frame
from envs.observation_text import bearing_degrees, distance_units, short_name, visible_objects

SHARD_PATTERN = re.compile(r"shard-(?P<scenario>[\w.-]+)-(?P<policy>\w+)-s(?P<seed>\d+)\.npz")


def shard_name(scenario: str, policy: str, seed: int) -> str:
    return f"shard-{scenario}-{policy}-s{seed}.npz"


class FrameTap:
    """A DoomEnv whose every `every`-th frame read (new_episode's first included) is kept in `frames`; everything
    else passes through, so any player (a baseline, the agent) can play on it unchanged."""

    def __init__(self, env, every: int = 1):
        self._env, self.every, self.frames, self._reads = env, max(1, every), [], 0

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _keep(self, frame: Frame | None) -> Frame | None:
        if frame is not None and frame.screen is not None:
            if self._reads % self.every == 0:
                self.frames.append(frame)
            self._reads += 1
        return frame

    def new_episode(self, *args, **kwargs):
        return self._keep(self._env.new_episode(*args, **kwargs))

    def read_frame(self):
        return self._keep(self._env.read_frame())


def object_table(frames: list[Frame]) -> dict[str, np.ndarray]:
    """Per object on each frame's screen (the frame line's candidates): frame index, short name, world bearing
    (degrees, positive = left), distance (map units), label box and rank in the frame line's aim order."""
    rows = []
    for index, frame in enumerate(frames):
        for rank, obj in enumerate(visible_objects(frame, aim_order=True)):
            rows.append((index, short_name(obj.name), bearing_degrees(frame, obj), distance_units(frame, obj),
                         obj.box, rank))
    return {
        "obj_frame": np.array([r[0] for r in rows], np.int32),
        "obj_name": np.array([r[1] for r in rows], dtype="U24"),
        "obj_bearing": np.array([r[2] for r in rows], np.float32),
        "obj_units": np.array([r[3] for r in rows], np.float32),
        "obj_box": np.array([r[4] for r in rows], np.int16).reshape(-1, 4),
        "obj_rank": np.array([r[5] for r in rows], np.int16),
    }


@contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` for the block to write; fsynced and renamed onto `path` when the block ends, so
    a kill leaves the old file or the new one, never half of one (envs/ cannot use the runtime's atomic_write)."""
    temporary = path.with_name(path.name + ".tmp")
    yield temporary
    with open(temporary, "rb") as f:
        os.fsync(f.fileno())
    os.replace(temporary, path)


def write_shard(path: Path, frames: list[Frame]) -> None:
    """The frames' screens and objects in one compressed file, written whole and renamed."""
    with replaced(path) as temporary, open(temporary, "wb") as out:  # a file: numpy would add ".npz" to a name
        np.savez_compressed(out, screens=np.stack([f.screen for f in frames]),
                            tics=np.array([f.tic for f in frames], np.int32), **object_table(frames))


@dataclass
class Shard:
    path: Path
    scenario: str
    policy: str
    seed: int


def list_shards(directory: Path) -> list[Shard]:
    """The data set's whole shards, in name order (a temporary one, cut short by a kill, is not a shard)."""
    out = []
    for path in sorted(Path(directory).glob("shard-*.npz")):
        match = SHARD_PATTERN.fullmatch(path.name)
        if match:
            out.append(Shard(path, match["scenario"], match["policy"], int(match["seed"])))
    return out


def data_hash(shards: list[Shard]) -> str:
    """sha256 over the shards' names and bytes, in name order (load_screens gives the same as ScreenSet.data_hash)."""
    digest = hashlib.sha256()
    for shard in shards:
        _hash_shard(digest, shard, shard.path.read_bytes())
    return digest.hexdigest()


def _hash_shard(digest, shard: Shard, raw: bytes) -> None:
    digest.update(shard.path.name.encode())
    digest.update(raw)


@dataclass
class ScreenSet:
    """Screens and their objects, concatenated over shards; `objects` rows point into `screens`."""

    screens: np.ndarray  # uint8 [N, H, W, 3]
    seeds: np.ndarray  # [N] the seed of the episode each screen came from
    scenarios: np.ndarray  # [N]
    objects: dict[str, np.ndarray]
    data_hash: str = ""  # the shards' (data_hash), set by load_screens

    def __len__(self) -> int:
        return len(self.screens)

    def objects_of(self, index: int) -> list[tuple[str, float, float, int]]:
        """(name, bearing, units, rank) of each object on screen `index`, in the frame line's aim order."""
        o = self.objects
        lo, hi = np.searchsorted(o["obj_frame"], [index, index + 1])
        return [(str(o["obj_name"][i]), float(o["obj_bearing"][i]), float(o["obj_units"][i]), int(o["obj_rank"][i]))
                for i in range(lo, hi)]

    def subset(self, mask: np.ndarray) -> ScreenSet:
        keep = np.flatnonzero(mask)
        where = np.full(len(self), -1, np.int64)
        where[keep] = np.arange(len(keep))
        rows = mask[self.objects["obj_frame"]]
        objects = {k: v[rows] for k, v in self.objects.items()}
        objects["obj_frame"] = where[objects["obj_frame"]].astype(np.int32)
        return ScreenSet(self.screens[keep], self.seeds[keep], self.scenarios[keep], objects, self.data_hash)


def load_screens(shards: list[Shard]) -> ScreenSet:
    """All shards in one ScreenSet (screens in shard order; the object rows stay sorted by screen), each file read
    once for its arrays and the data hash."""
    screens, seeds, scenarios, tables, offset, digest = [], [], [], [], 0, hashlib.sha256()
    for shard in shards:
        raw = shard.path.read_bytes()
        _hash_shard(digest, shard, raw)
        with np.load(io.BytesIO(raw)) as data:
            part = {k: data[k] for k in data.files}
        n = len(part["screens"])
        screens.append(part["screens"])
        seeds.append(np.full(n, shard.seed, np.int64))
        scenarios.append(np.full(n, shard.scenario, dtype="U40"))
        part["obj_frame"] = part["obj_frame"] + offset
        tables.append({k: v for k, v in part.items() if k.startswith("obj_")})
        offset += n
    if not screens:
        raise ValueError("no shards to load")
    objects = {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}
    return ScreenSet(np.concatenate(screens), np.concatenate(seeds), np.concatenate(scenarios), objects,
                     digest.hexdigest())
