"""Optional dependencies (pyproject.toml's extras): imported where they are needed, or one line naming the extra."""

import importlib

from agent_runtime.errors import UserError


def missing_extra(module: str, extra: str) -> UserError:
    return UserError(f"{module} is not installed: this needs the [{extra}] extra: "
                     f"pip install 'doom-agent-runtime[{extra}]'")


def require(module: str, extra: str):
    """The imported module, or a UserError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0]:  # the module is there, something it needs is not: its own error says what
            raise
        raise missing_extra(module, extra) from None
