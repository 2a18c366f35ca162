"""manifest.json: what a recording needs to be understood and re-run later (config, model, seeds, versions).

Rewritten on close with the finished .lmp's hash, so a .lmp swapped in from elsewhere is caught before replay.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from agent_runtime.errors import UserError, first_line

FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MANIFEST_FILE = "manifest.json"
PACKAGES = ("vizdoom", "torch", "transformers", "numpy")
REQUIRED_FIELDS = {"scenario": str, "clock": str, "config": dict, "seeds": dict, "packages": dict, "created": str}
# optional manifest fields -> (type, how an error names it); null is always allowed
OPTIONAL_FIELDS = {"model_id": (str, "a string"), "model_weight_hash": (str, "a string"),
                   "threads": (int, "an integer"), "lmp": (dict, "an object"), "extra": (dict, "an object")}


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata so nothing heavy (torch) gets imported."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = platform.python_version()
    return versions


def hash_file(path: str | Path, *, digest_size: int = 16) -> str:
    """blake2b of a file's bytes (for weight files and the .lmp)."""
    h = hashlib.blake2b(digest_size=digest_size)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json_atomic(path: str | Path, data: Any, *, sort_keys: bool = False) -> None:
    """A crash leaves the old file or the new one, never half of one; nor a half-written temp file (a full disk)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys, default=str) + "\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class Manifest:
    scenario: str
    clock: str
    config: dict[str, Any] = field(default_factory=dict)
    model_id: str | None = None
    model_weight_hash: str | None = None
    seeds: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    packages: dict[str, str | None] = field(default_factory=package_versions)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    format_version: int = FORMAT_VERSION
    lmp: dict[str, Any] | None = None  # {"file", "scenario", "blake2b"}: set on close once the .lmp is finished
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, config: Any, *, model_id: str | None = None, model_weight_hash: str | None = None,
              seeds: dict[str, Any] | None = None, **extra: Any) -> Manifest:
        """From a RunConfig (or its model_dump()) plus what only the running engine knows (threads: config.model's)."""
        data = config.model_dump() if hasattr(config, "model_dump") else dict(config)
        return cls(
            scenario=str(data.get("scenario", "")), clock=str(data.get("clock", "sync")), config=data,
            model_id=model_id, model_weight_hash=model_weight_hash, threads=(data.get("model") or {}).get("threads"),
            seeds=dict(seeds) if seeds is not None else {"run": data.get("seed")}, extra=extra,
        )

    def write(self, path: str | Path) -> None:
        """Atomic: a crash leaves the old manifest or the new one, never half of one."""
        write_json_atomic(path, asdict(self), sort_keys=True)

    @classmethod
    def read(cls, path: str | Path) -> Manifest:
        """UserError (naming the file) for anything that is not a manifest this runtime reads."""
        path = Path(path)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise UserError(f"{path}: not found (a recording directory needs a {MANIFEST_FILE})") from None
        except OSError as e:
            raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
        except (ValueError, RecursionError) as e:
            raise UserError(f"{path}: not valid JSON ({first_line(e)})") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a JSON object at the top level")
        version = data.get("format_version")
        if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
            raise UserError(f"{path}: unknown format_version {version!r} (this runtime reads "
                            f"{', '.join(map(str, SUPPORTED_VERSIONS))}); use the runtime version that wrote it")
        for key, kind in REQUIRED_FIELDS.items():
            if not isinstance(data.get(key), kind):
                raise UserError(f"{path}: '{key}' is missing or not a {kind.__name__}")
        for key, (kind, what) in OPTIONAL_FIELDS.items():
            value = data.get(key)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise UserError(f"{path}: '{key}' must be {what} or null")
        data["extra"] = data.get("extra") or {}
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})
