"""Headless episodes played by the multi-stream agent on a synchronous world moved by compute time."""

from envs.doom_env import DoomEnv

from agent_runtime.session.clocks import FixedCost, SessionClock
from agent_runtime.session.events import EventBus
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.session.runtime import Runtime
from agent_runtime.session.session_loop import play_headless
from agent_runtime.control.user_inputs import ScriptedInputs


def run_llm_episode(env: DoomEnv, runtime: Runtime, *, seed: int | None = None, max_tics: int | None = None,
                    fixed_cost: FixedCost | None = None, bus: EventBus | None = None, think: bool = True,
                    user_script: dict | None = None, progress=None, record_path: str | None = None,
                    agent_seed: int = 0, replay_costs: list[float] | None = None,
                    replay_encode_ms: list[float] | None = None, on_decision=None, commentary: bool = False,
                    on_paragraph=None, on_remark=None) -> dict:
    """Play one episode with the multi-stream agent; return its result (SessionLoop.result) and timing metrics.
    user_script: {engine step: text or (text, command)}; replay_costs, replay_encode_ms: step costs and frame
    encoding times (ms) to charge, not measured. commentary: the agent also makes remarks (events only).
    on_decision, on_paragraph, on_remark: the action stream's, the Thinker's and the commentary's teachers (data
    collection; MultiStreamAgent)."""
    config = runtime.config
    bounds = runtime.time_bounds(fixed_cost)
    engine = config.engine.model_copy(update={"think": think and config.engine.think})
    clock = SessionClock(fixed_cost, replay_costs=replay_costs, replay_encode_ms=replay_encode_ms)
    result, _ = play_headless(
        env, clock, bounds,
        lambda generation: MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, generation,
                                            engine=engine, budgets=config.budgets, scenario=env.scenario,
                                            seed=agent_seed, on_decision=on_decision, bus=bus, commentary=commentary,
                                            on_paragraph=on_paragraph, on_remark=on_remark,
                                            frame_encoder=runtime.frame_encoder, vision=runtime.vision,
                                            encode_cost=clock.frame_encode_ms),
        inputs=ScriptedInputs(user_script, runtime.grammar) if user_script else None, bus=bus, progress=progress,
        store=runtime.store, record_path=record_path, seed=seed, max_tics=max_tics)
    result["max_action_age_ms"] = bounds.max_action_age_ms  # what fenced the actions (auto: resolved here)
    return result
