"""Baselines with the same model: the ordinary read → think → act loop, and read → act without thinking.

While these agents compute, the world keeps moving (each forward is charged to the session clock), but
they only look at the world again when they are done: that is the latency the multi-stream agent removes.
"""

from __future__ import annotations

import math
import time

import torch

from envs.doom_env import DoomEnv
from envs.observation_text import encode_observation

from agent_runtime import signals
from agent_runtime.action_executor import Action, ActionExecutor
from agent_runtime.action_grammar import CommandScorer
from agent_runtime.clocks import MS_PER_TIC, FixedCost, SessionClock
from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.model_runner import StreamInput
from agent_runtime.prompts import ACTION_PROMPT, FRAME_PREFIX, THOUGHT_PROMPT, system_prompt
from agent_runtime.sync_world import SyncWorld, TimedFrame
from agent_runtime.view import View


class SequentialAgent:
    """One stream: frame text, then `think_tokens` of thought (0 = no-think), then a scored command."""

    def __init__(self, runtime, *, scenario: str, think_tokens: int, seed: int = 0, history_cycles: int = 2,
                 temperature: float = 0.8):
        self.runtime = runtime
        self.runner, self.store, self.tok = runtime.runner, runtime.store, runtime.loaded.tokenizer
        self.think_tokens = think_tokens
        self.history_cycles = history_cycles
        self.temperature = temperature
        self.rng = torch.Generator().manual_seed(seed)
        self.scorer = CommandScorer(runtime.grammar, self.tok)
        self.system = self.store.create("system")
        v = View(self.store, own=self.system)
        self.runner.prefill(v, self._enc(system_prompt(scenario, runtime.grammar.describe())))
        v.close()
        self.action_prompt, self.thought_prompt = self._enc(ACTION_PROMPT), self._enc(THOUGHT_PROMPT)
        self.history: list = []
        self.thinker_tokens = 0
        self.forwards = 0

    def _enc(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def decide(self, timed: TimedFrame, charge) -> tuple:
        """Run one read-think-act cycle; charge(measured_s, decode_rows, prefill_tokens) moves the world."""
        view = View(self.store, [self.system] + self.history, name="sequential")
        view.start_own("cycle")
        frame_text = FRAME_PREFIX + encode_observation(timed.frame)
        prompt = self.action_prompt
        if self.think_tokens:
            tokens = self._enc(frame_text) + self.thought_prompt
            logits = self._forward([StreamInput(view, tokens)], charge, prefill=len(tokens))[0]
            for i in range(self.think_tokens):
                probs = torch.softmax(logits / self.temperature, -1)
                token = int(torch.multinomial(probs, 1, generator=self.rng))
                self.thinker_tokens += 1
                if i == self.think_tokens - 1:
                    prompt = [token] + prompt  # the last thought token rides along with the action prompt
                else:
                    logits = self._forward([StreamInput(view, [token])], charge, decode=1)[0]
        else:  # no-think: frame and action prompt in one forward, like the multi-stream decision step
            prompt = self._enc(frame_text) + prompt
        branches = self.scorer.branch_inputs(view)
        inputs = [StreamInput(view, prompt)] + branches
        out = self._forward(inputs, charge, prefill=sum(len(x.tokens) for x in inputs))
        command, _ = self.scorer.best(out[0], out[1:])
        for b in branches:
            b.view.close()
        self.history.append(view.detach_own())
        view.close()
        while len(self.history) > self.history_cycles:
            self.store.release(self.history.pop(0))
        return command

    def _forward(self, inputs, charge, *, decode: int = 0, prefill: int = 0):
        t0 = time.perf_counter()
        result = self.runner.forward(inputs)
        self.forwards += 1
        charge(time.perf_counter() - t0, decode, prefill)
        return result.logits

    def close(self) -> None:
        for b in self.history:
            self.store.release(b)
        self.history = []
        self.store.release(self.system)


@signals.stoppable()
def run_sequential_episode(env: DoomEnv, runtime, *, think_tokens: int, seed: int | None = None,
                           max_tics: int | None = None, fixed_cost: FixedCost | None = None,
                           bus: EventBus | None = None, max_action_age_ms: float = math.inf,
                           agent_seed: int = 0, progress=None) -> dict:
    """Read the newest frame, think, act; repeat. Fencing is off by default: an ordinary loop acts late."""
    clock = SessionClock(fixed_cost)
    generation = SessionGeneration()
    world = SyncWorld(env, clock, frame_window_ms=2 * MS_PER_TIC)
    name = "sequential" if think_tokens else "no_think"
    executor = ActionExecutor(world, generation, max_action_age_ms=max_action_age_ms, bus=bus)
    agent = SequentialAgent(runtime, scenario=env.scenario, think_tokens=think_tokens, seed=agent_seed)
    latest: list[TimedFrame] = []

    def charge(measured_s, decode, prefill):
        frames = world.advance_ms(clock.step_cost_ms(measured_s, decode, prefill))
        if frames:
            latest[:] = frames[-1:]

    decisions = 0
    try:
        first = env.new_episode(seed=seed)
        start_tic = first.tic
        latest[:] = [TimedFrame(first, clock.now_ms)]
        while not world.finished:
            signals.check()  # SIGINT/SIGTERM: stop between two steps
            if max_tics is not None and env.tic - start_tic >= max_tics:
                break
            if not latest:
                world.advance_ms(MS_PER_TIC)
                continue
            timed = latest.pop()
            command = agent.decide(timed, charge)
            decisions += 1
            action = Action(command, generation.current, timed.frame.tic, timed.read_ms, clock.now_ms, source=name)
            executor.execute(action, clock.now_ms)
            if progress is not None and decisions % 10 == 0:
                progress(env.tic - start_tic, env.kills, executor.stats.executed)
        end_tic = env.tic
    finally:
        agent.close()
    e = executor.stats
    return {
        "reward": world.reward,
        "kills": env.kills,
        "tics": end_tic - start_tic,
        **e.summary(),
        "frames_dropped": 0,
        "thinker_tokens": agent.thinker_tokens,
        "decisions": decisions,
        "engine_steps": agent.forwards,
        "session_ms": clock.now_ms,
        "clock": clock.name,
    }
