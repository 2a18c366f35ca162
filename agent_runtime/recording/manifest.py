"""manifest.json: what a recording needs to be understood and re-run later (config, model, seeds, versions).

Rewritten on close with the finished .lmp's hash, so a .lmp swapped in from elsewhere is caught before replay.
Its JSON schema is docs/manifest.schema.json (`python -m agent_runtime.recording.manifest` writes it).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agent_runtime.atomic_write import write_json_atomic
from agent_runtime.errors import UserError, first_line

FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MANIFEST_FILE = "manifest.json"
PACKAGES = ("vizdoom", "torch", "transformers", "numpy")


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


class Manifest(BaseModel):
    """A recording's manifest.json; reading checks each field's JSON type (no conversions), unknown keys are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", title="Recording manifest")

    scenario: str = Field(description="the scenario played (config.scenario)")
    clock: str = Field(description="the clock that moved the world: sync, realtime, compute, fixed_cost or policy_tics")
    config: dict[str, Any] = Field(description="the whole RunConfig, as model_dump() gives it")
    model_id: str | None = Field(None, description="the model that played (null: none, e.g. a baseline policy)")
    model_weight_hash: str | None = Field(None, description="blake2b of the model's weights, checked on rerun")
    seeds: dict[str, Any] = Field(description="the seeds used: run, env, agent, model")
    threads: int | None = Field(None, description="the model's CPU threads")
    packages: dict[str, str | None] = Field(description="installed versions of vizdoom, torch, ..., and python")
    created: str = Field(description="local time the recording started, ISO 8601")
    format_version: int = Field(FORMAT_VERSION, description="this layout's version")
    lmp: dict[str, Any] | None = Field(None, description='{"file", "scenario", "blake2b"} of the finished .lmp, set '
                                                          'on close')
    extra: Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=dict, description="what else the run knew: policy, completeness, end reason, audio files")

    @classmethod
    def build(cls, config: Any, *, model_id: str | None = None, model_weight_hash: str | None = None,
              seeds: dict[str, Any] | None = None, **extra: Any) -> Manifest:
        """From a RunConfig (or its model_dump()) plus what only the running engine knows (threads: config.model's)."""
        data = config.model_dump() if hasattr(config, "model_dump") else dict(config)
        return cls(
            scenario=str(data.get("scenario", "")), clock=str(data.get("clock", "sync")), config=data,
            model_id=model_id, model_weight_hash=model_weight_hash, threads=(data.get("model") or {}).get("threads"),
            seeds=dict(seeds) if seeds is not None else {"run": data.get("seed")}, packages=package_versions(),
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), extra=extra,
        )

    def write(self, path: str | Path) -> None:
        """Atomic: a crash leaves the old manifest or the new one, never half of one."""
        write_json_atomic(path, self.model_dump(), sort_keys=True)

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
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise UserError(f"{path}: {_problem(e)}") from None


def _problem(e: ValidationError) -> str:
    """The first thing wrong with a manifest, in one line: "'threads' must be an integer or null"."""
    first, more = e.errors()[0], e.error_count() - 1
    where = ".".join(map(str, first["loc"]))
    said = "is missing" if first["type"] == "missing" else f"is invalid: {first['msg'].lower()}"
    return f"'{where}' {said}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


if __name__ == "__main__":  # docs/manifest.schema.json
    print(json.dumps(Manifest.model_json_schema(), indent=2))
