"""Shared set-up for engine tests: a tiny random model runtime on a real ViZDoom scenario."""

from __future__ import annotations

from agent_runtime.config import BudgetConfig, RunConfig
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.session.generation import SessionGeneration
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


def make_agent(runtime: Runtime, scenario: str, generation: SessionGeneration | None = None, *, commentary=False,
               on_sentence=None, bus=None, **engine) -> MultiStreamAgent:
    """The engine as the CLI builds it: the runtime's config sections, with the `engine` keys given overridden."""
    return MultiStreamAgent(runtime.runner, runtime.loaded.tokenizer, runtime.grammar,
                            generation if generation is not None else SessionGeneration(),
                            engine=runtime.config.engine.model_copy(update=engine), budgets=runtime.config.budgets,
                            scenario=scenario, commentary=commentary, on_sentence=on_sentence, bus=bus)


def prefilled_view(loaded, blocks: list[tuple[list[int], bool]], own_label: str) -> tuple[ModelRunner, View]:
    """A view over `blocks` prefilled as the engine does (an isolated block, like a frame, status or system text, on
    a view of itself alone; any other after the blocks before it), with an empty own block: the runner and the view."""
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=1024, page_size=16)
    runner = ModelRunner(loaded, store)
    done = []
    for tokens, isolated in blocks:
        writer = View(store, [] if isolated else list(done))
        writer.start_own("block")
        runner.forward([StreamInput(writer, tokens, logits="none")])
        done.append(writer.own)
    view = View(store, done)
    view.start_own(own_label)
    return runner, view
