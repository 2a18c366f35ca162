"""docs/configuration.md, written from the config models: run COMMAND after a field changes (tests/test_docs.py
checks the page is current)."""

from __future__ import annotations

import sys
import typing
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from agent_runtime.config import RunConfig  # noqa: E402

COMMAND = ".venv/bin/python docs/gen_configuration.py > docs/configuration.md"
_BOUNDS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}


def _type(annotation) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if typing.get_args(annotation):  # a union
        return " \\| ".join(_type(a) for a in typing.get_args(annotation))
    return "null" if annotation is type(None) else annotation.__name__


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        value = field.default
        value = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
        bounds = [f"{sign} {getattr(m, op)}" for m in field.metadata for op, sign in _BOUNDS.items() if hasattr(m, op)]
        kind, default = ", ".join([_type(field.annotation), *bounds]), f"`{value}`"
        if isinstance(field.default, BaseModel):
            kind, default = "section", f"[{name}](#{name})"
        rows.append(f"| `{prefix}{name}` | {kind} | {default} | {field.description} |")
    return rows


def reference() -> str:
    """The whole page: the top-level keys, then one table per section."""
    lines = [f"<!-- generated from agent_runtime/config.py by `{COMMAND}`; do not edit -->", "# Configuration", "",
             "A run config is a YAML file (`--config FILE`; without it, the package's `default.yaml`, which holds the",
             "defaults below). It names only the keys it changes; every other key keeps its default. Every value is",
             "validated: a bad one is one line that names its key and what is allowed, and exit code 2.", ""]
    sections = [("Top level", RunConfig, "")] + [(name, type(field.default), f"{name}.") for name, field in
                                                 RunConfig.model_fields.items() if isinstance(field.default, BaseModel)]
    for title, model, prefix in sections:
        lines += [f"## {title}", "", model.__doc__.strip(), "", "| key | type | default | description |",
                  "|---|---|---|---|", *_rows(model, prefix), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference(), end="")
