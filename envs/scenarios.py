"""Find ViZDoom scenario configs by bundled name or by path, with errors that say what exists."""

from __future__ import annotations

from pathlib import Path

import vizdoom

SCENARIOS_DIR = Path(vizdoom.scenarios_path)

# Bundled .cfg files that are engine presets or multiplayer setups, not playable single-player scenarios.
_NOT_SCENARIOS = frozenset({"doom", "doom2", "freedoom1", "freedoom2", "learning", "bots", "oblige"})


class ScenarioError(ValueError):
    """A scenario name or .cfg path that cannot be used; the message is one line."""


def list_scenarios() -> list[str]:
    """Names accepted by resolve_scenario, sorted."""
    return sorted(p.stem for p in SCENARIOS_DIR.glob("*.cfg") if p.stem not in _NOT_SCENARIOS)


def resolve_scenario(name_or_path: str | Path) -> Path:
    """Return the .cfg for a bundled scenario name ("defend_the_center") or an existing .cfg path."""
    text = str(name_or_path).strip()
    if not text:
        raise ScenarioError(f"empty scenario name; available: {', '.join(list_scenarios())}")
    looks_like_path = text.endswith(".cfg") or "/" in text or "\\" in text
    if looks_like_path:
        path = Path(text).expanduser()
        if path.is_file():
            if path.suffix != ".cfg":
                raise ScenarioError(f"scenario file {path} is not a .cfg ViZDoom config")
            return path.resolve()
        bundled = SCENARIOS_DIR / path.name
        if path.parent == Path(".") and bundled.is_file():
            return bundled
        raise ScenarioError(
            f"scenario config not found: {path} (pass an existing .cfg file or one of: {', '.join(list_scenarios())})"
        )
    bundled = SCENARIOS_DIR / f"{text}.cfg"
    if bundled.is_file():
        return bundled
    raise ScenarioError(f"unknown scenario '{text}'; available: {', '.join(list_scenarios())} (or a path to a .cfg)")
