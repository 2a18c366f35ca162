"""Shared set-up for engine tests: a tiny random model runtime on a real ViZDoom scenario."""

from __future__ import annotations

from agent_runtime.config import BudgetConfig, RunConfig
from agent_runtime.session.runtime import Runtime
from agent_runtime.model.model_loader import load_model
from envs.doom_env import DoomEnv

_LOADED = {}


def tiny_loaded(kind: str = "llama"):
    if kind not in _LOADED:
        _LOADED[kind] = load_model(f"tiny:{kind}", dtype="float32", seed=0)
    return _LOADED[kind]


def make_runtime(env: DoomEnv, *, kind: str = "llama", capacity_tokens: int = 4096, engine: dict | None = None,
                 **budgets) -> Runtime:
    config = RunConfig(budgets=BudgetConfig(**budgets), kv={"capacity_tokens": capacity_tokens, "page_size": 16},
                       engine=engine or {})
    return Runtime.build(tiny_loaded(kind), config, env.buttons, scenario=env.scenario)


class ActRecorder:
    """Wraps DoomEnv.act to record exactly what reached the game."""

    def __init__(self, env: DoomEnv):
        self.calls: list[tuple[dict, int]] = []
        self._act = env.act
        env.act = self

    def __call__(self, buttons, tics=1):
        self.calls.append((dict(buttons), tics))
        return self._act(buttons, tics)
