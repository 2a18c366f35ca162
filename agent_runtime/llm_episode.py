"""Headless episodes played by a language-model agent on a synchronous world moved by compute time."""

from __future__ import annotations

from dataclasses import dataclass


from envs.doom_env import DoomEnv

from agent_runtime import signals
from agent_runtime.action_executor import ActionExecutor
from agent_runtime.action_grammar import ActionGrammar
from agent_runtime.clocks import MS_PER_TIC, FixedCost, SessionClock
from agent_runtime.config import RunConfig
from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.kv_block_store import KVBlockStore
from agent_runtime.model_loader import LoadedModel
from agent_runtime.model_runner import ModelRunner
from agent_runtime.multistream_agent import MultiStreamAgent, engine_options
from agent_runtime.sync_world import SyncWorld, TimedFrame


@dataclass
class LLMRuntime:
    """What stays loaded across episodes: the model, its block store and runner, the action grammar."""

    loaded: LoadedModel
    store: KVBlockStore
    runner: ModelRunner
    grammar: ActionGrammar
    config: RunConfig

    @classmethod
    def build(cls, loaded: LoadedModel, config: RunConfig, buttons: tuple[str, ...], *, scenario: str,
              device: str = "cpu") -> "LLMRuntime":
        """device="cuda": model, KV pool and Triton view attention on the GPU (when one exists)."""
        loaded.model.to(device)
        dtype = next(loaded.model.parameters()).dtype
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=config.kv.capacity_tokens,
                                       page_size=config.kv.page_size, dtype=dtype, device=device)
        runner = ModelRunner(loaded, store, device=device, backend="triton" if device == "cuda" else "torch")
        grammar = ActionGrammar(buttons, loaded.tokenizer, scenario=scenario,
                                default_tics=config.engine.action_hold_tics)
        return cls(loaded, store, runner, grammar, config)


@signals.stoppable()
def run_llm_episode(env: DoomEnv, runtime: LLMRuntime, *, seed: int | None = None, max_tics: int | None = None,
                    fixed_cost: FixedCost | None = None, bus: EventBus | None = None, think: bool = True,
                    user_script: dict[int, tuple[str, object]] | None = None, progress=None,
                    record_path: str | None = None, agent_seed: int = 0,
                    replay_costs: list[float] | None = None, on_decision=None) -> dict:
    """Play one episode with the multi-stream agent; return its result and timing metrics.

    user_script: {engine step index: (text, Command | None)} typed user commands injected during play.
    replay_costs: charge these step costs (ms, in order) instead of measuring, to re-run a recording exactly.
    on_decision: the agent's decision hook (MultiStreamAgent), for data collection.
    """
    config = runtime.config
    clock = SessionClock(fixed_cost)
    generation = SessionGeneration()
    if bus is not None:
        bus.clock = clock.name
    world = SyncWorld(env, clock, frame_window_ms=config.budgets.max_frame_age_ms)
    executor = ActionExecutor(world, generation, max_action_age_ms=config.budgets.max_action_age_ms, bus=bus)
    options = {**engine_options(config.engine), "think": think and config.engine.think}
    agent = MultiStreamAgent(runtime.runner, runtime.loaded.tokenizer, runtime.grammar, config.budgets, generation,
                             scenario=env.scenario, bus=bus, seed=agent_seed, on_decision=on_decision, **options)
    pool_peak = runtime.store.used_pages
    try:
        first = env.new_episode(record_path, seed=seed)
        start_tic = first.tic
        agent.push_frame(TimedFrame(first, clock.now_ms))
        step_index = 0
        while not world.finished:
            signals.check()  # SIGINT/SIGTERM: stop between two steps
            if max_tics is not None and env.tic - start_tic >= max_tics:
                break
            if user_script and step_index in user_script:
                text, command = user_script[step_index]
                if bus is not None:
                    bus.emit("user_input", "user", generation=generation.current, tic=env.tic, sim_ms=clock.now_ms,
                             step=step_index, text=text, command=command.text if command else None)
                direct = agent.push_user_text(text, clock.now_ms, command)
                if direct is not None:
                    executor.execute(direct, clock.now_ms)
            outcome = agent.step(clock.now_ms)
            if replay_costs is not None:
                if step_index >= len(replay_costs):
                    break  # the recorded run ended here
                cost = replay_costs[step_index]
            elif not outcome.batch:
                cost = MS_PER_TIC  # nothing to compute: wait for the next frame
            else:
                cost = clock.step_cost_ms(outcome.measured_s, outcome.decode_rows, outcome.prefill_tokens)
            if bus is not None:
                bus.emit("clock_advance", "engine", generation=generation.current, tic=env.tic, sim_ms=clock.now_ms,
                         step=step_index, cost_ms=cost)
            frames = world.advance_ms(cost)
            for action in outcome.actions:
                executor.execute(action, clock.now_ms)
            for timed in frames:
                agent.push_frame(timed)
            pool_peak = max(pool_peak, runtime.store.used_pages)
            step_index += 1
            if progress is not None and step_index % 25 == 0:
                progress(env.tic - start_tic, env.kills, executor.stats.executed)
        end_tic = env.tic
    finally:
        agent.close()
    s, e = agent.stats, executor.stats
    return {
        "reward": world.reward,
        "kills": env.kills,
        "tics": end_tic - start_tic,
        **e.summary(),
        "frames_dropped": s.frames_dropped,
        "frames_prefilled": s.frames_prefilled,
        "thinker_tokens": s.thinker_tokens,
        "thinker_paragraphs": s.thinker_paragraphs,
        "decisions": s.decisions,
        "decisions_abandoned": s.decisions_abandoned,
        "engine_steps": s.steps,
        "joint_decode_steps": s.joint_decode_steps,
        "session_ms": clock.now_ms,
        "clock": clock.name,
        "pool_peak_pages": pool_peak,
        "pool_capacity_pages": runtime.store.num_pages,
    }
