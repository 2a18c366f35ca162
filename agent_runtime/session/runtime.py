"""The runtime, assembled once: the model, its KV block pool and runner, the scenario's action grammar.

What stays loaded across episodes lives here; each episode gets its own world, agent and executor.
"""

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from envs.detector_training import DetectorWeightsError
from envs.doom_env import DoomEnv
from envs.frame_encoders import frame_encoder

from agent_runtime.control.action_grammar import ActionGrammar
from agent_runtime.errors import UserError
from agent_runtime.model.adapters import view_mismatch
from agent_runtime.config import RunConfig
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.model_loader import LoadedModel, load_for_cpu
from agent_runtime.notices import stderr_line, warning_line
from agent_runtime.engine.model_runner import ModelRunner
from agent_runtime.session.time_bounds import AUTO, TimeBounds, decision_step_cost_ms


SHIPPED_DETECTOR = Path(__file__).parents[1] / "trained" / "screen-detector" / "detector.safetensors"


def open_frame_encoder(engine, vision=None):
    """engine.frame_source's encoder; pixels loads engine.detector's weights (null: the shipped ones). A missing or
    damaged weights file is a UserError (one line). engine.frame_line none: no encoder (no line), which needs image
    tokens in the frame blocks: a vision-language model (`vision`) with frame_source pixels."""
    if engine.frame_line == "none":
        if vision is None or engine.frame_source != "pixels":
            raise UserError("engine.frame_line none leaves frame blocks empty unless a vision-language model's image "
                            "tokens fill them: use --model with an Idefics3/SmolVLM or LLaVA-style model (or "
                            "tiny:smolvlm) and --frame-source pixels, or another engine.frame_line")
        return None
    try:
        return frame_encoder(engine.frame_source, engine.detector or SHIPPED_DETECTOR)
    except DetectorWeightsError as e:
        raise UserError(str(e)) from None


@dataclass
class Runtime(AbstractContextManager):  # `with Runtime.open(...) as runtime:` closes the env it opened
    loaded: LoadedModel
    store: KVBlockStore
    runner: ModelRunner
    grammar: ActionGrammar
    config: RunConfig
    frame_encoder: object = None  # what writes frame lines (engine.frame_source): envs/frame_encoders.py; None: none
    env: object = None  # the DoomEnv Runtime.open opened (closed with the runtime), else None
    _bounds: dict = field(default_factory=dict, repr=False)  # resolved TimeBounds per clock

    @property
    def tokenizer(self):
        return self.loaded.tokenizer

    @property
    def vision(self):
        """The vision tower whose image tokens frame blocks hold: a vision-language model's, with frame_source
        pixels (None otherwise: frames are text)."""
        return self.loaded.vision if self.config.engine.frame_source == "pixels" else None

    def time_bounds(self, fixed_cost=None, *, announce: bool = False) -> TimeBounds:
        """The age bounds every session of this runtime plays under, resolved once per clock: max_action_age_ms
        auto from a decision step's cost (session/time_bounds.py), on the fixed-cost clock that clock's price of it.
        announce: print the bound once, when it is resolved from a measurement."""
        key = repr(fixed_cost) if fixed_cost is not None else "measured"
        if key not in self._bounds:
            step_ms = None
            if self.config.budgets.max_action_age_ms == AUTO:
                step_ms = decision_step_cost_ms(self.runner, len(self.grammar.words), fixed_cost)
            self._bounds[key] = TimeBounds.from_budgets(self.config.budgets, step_ms)
            if announce and step_ms is not None and fixed_cost is None:
                stderr_line(self._bounds[key].describe())
        return self._bounds[key]

    def frame_identity(self) -> dict:
        """What wrote the frame blocks, for manifests: the frame source and the screen detector's hash (None when
        the labels or a vision-language model's image tokens alone wrote them)."""
        encoder = self.frame_encoder
        return {"frame_source": self.config.engine.frame_source,
                "detector_hash": encoder.weights_hash if encoder is not None else None}

    @classmethod
    def open(cls, config: RunConfig, *, model: str | None = None, loaded: LoadedModel | None = None, env=None,
             scenario: str | None = None, clock: str = "sync", env_seed: int | None = None, threads: int | None = None,
             adapter: str | None = None, seed: int = 0, window: bool = False, device: str = "cpu",
             announce: bool = True, warn: bool = True, labels: bool | None = None) -> "Runtime":
        """model/adapter/threads default to the config's; env: play on this DoomEnv instead of opening one, else one
        with the label buffer on when `labels` (None: when the frame lines come from it)."""
        if loaded is None:
            loaded = load_for_cpu(model or config.model.path, dtype=config.model.dtype,
                                  threads=threads or config.model.threads, seed=seed, announce=announce, warn=warn,
                                  adapter=adapter if adapter is not None else config.model.adapter,
                                  scenario=scenario or config.scenario)
        owned = None
        if env is None:
            env = owned = DoomEnv(scenario or config.scenario, resolution=config.resolution, clock=clock,
                                  seed=config.seed if env_seed is None else env_seed, window=window,
                                  labels=config.engine.frame_source == "labels" if labels is None else labels)
        try:
            runtime = cls.build(loaded, config, env.buttons, scenario=env.scenario, device=device)
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        runtime.env = owned
        mismatch = view_mismatch(loaded.adapter, config.engine)
        if warn and mismatch:
            warning_line(mismatch)
        return runtime

    @classmethod
    def build(cls, loaded: LoadedModel, config: RunConfig, buttons: tuple[str, ...], *, scenario: str,
              device: str = "cpu") -> "Runtime":
        """device="cuda": model, KV pool and Triton view attention on the GPU (when one exists)."""
        loaded.model.to(device)
        if loaded.vision is not None:
            loaded.vision.to(device)
        dtype = next(loaded.model.parameters()).dtype
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=config.kv.capacity_tokens,
                                       page_size=config.kv.page_size, dtype=dtype, device=device)
        runner = ModelRunner(loaded, store, device=device, backend="triton" if device == "cuda" else "torch")
        grammar = ActionGrammar(buttons, loaded.tokenizer, scenario=scenario,
                                default_tics=config.engine.action_hold_tics, hold_counts=config.engine.hold_counts,
                                count_text=config.engine.hold_count_text)
        return cls(loaded, store, runner, grammar, config, open_frame_encoder(
            config.engine, loaded.vision if config.engine.frame_source == "pixels" else None))

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    def __exit__(self, *exc) -> None:
        self.close()
