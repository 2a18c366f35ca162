"""Baselines with the same model: the ordinary read → think → act loop, and read → act without thinking.

They compute one forward per step as the engine does, but only look at the world again when a cycle is done:
that is the latency the multi-stream agent removes. They decide from the blocks the action stream reads (the
system prompt, a status block and a frame line each prefilled on a view of itself, then the prompt), so an
adapter plays them as it learned to: only the schedule differs.
"""

from envs.doom_env import DoomEnv

from agent_runtime.control.action_executor import Action
from agent_runtime.control.action_grammar import CommandScorer
from agent_runtime.session.clocks import MS_PER_TIC, FixedCost, SessionClock, measured
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.multistream_agent import AgentStats, StepOutcome, prefill_system
from agent_runtime.engine.sampler import sampler
from agent_runtime.engine.prompts import ACTION_PROMPT, THOUGHT_PROMPT, encode
from agent_runtime.session.session_loop import play_headless
from agent_runtime.engine.streams.frames import frame_line, status_line
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.engine.view import View


class SequentialAgent:
    """One stream: status and frame line, then `think_tokens` of thought (0 = no-think), then a scored command; a
    cycle starts on the newest frame read when the last one ended."""

    def __init__(self, runtime, generation: SessionGeneration, *, scenario: str, think_tokens: int, seed: int = 0):
        self.runner, self.store, self.tok = runtime.runner, runtime.store, runtime.tokenizer
        self.signed_bearings = runtime.config.engine.signed_bearings
        self.aimed = runtime.config.engine.frame_line == "aimed"
        self.encoder, self.encode_s = runtime.frame_encoder, 0.0  # encode_s: charged with the next forward
        self.generation, self.think_tokens = generation, think_tokens
        self.source = "sequential" if think_tokens else "no_think"
        self.sample = sampler(runtime.config.engine.temperature, seed)
        self.scorer = CommandScorer(runtime.grammar, self.tok)
        self.system = prefill_system(self.runner, self.tok, runtime.grammar, scenario)
        self.action_prompt, self.thought_prompt = encode(self.tok, ACTION_PROMPT), encode(self.tok, THOUGHT_PROMPT)
        self.stats = AgentStats()  # steps (forwards), thinker_tokens and decisions count here
        self.latest: TimedFrame | None = None
        self.cycle = None  # (view, frame, thought tokens left, logits of the last forward)

    def push_frame(self, timed: TimedFrame) -> None:
        self.latest = timed

    def new_episode(self) -> None:
        self.latest = None

    def step(self, now_ms: float) -> StepOutcome:
        """One forward of the cycle: read (and start thinking), one thought token, or the decision."""
        if self.cycle is None:
            if self.latest is None:
                return StepOutcome([], 0.0, 0, 0, [])
            return self._read(self.latest)
        view, timed, left, logits = self.cycle
        token = self.sample(logits)
        self.stats.thinker_tokens += 1
        if left > 1:
            (logits,), seconds = self._forward([StreamInput(view, [token])])
            self.cycle = (view, timed, left - 1, logits)
            return StepOutcome([], seconds, 1, 0, [("sequential", 1)])
        return self._decide(view, timed, [token] + self.action_prompt, now_ms)  # the last token rides along

    def _read(self, timed: TimedFrame) -> StepOutcome:
        """The status and frame line go into blocks of their own (as the frame stream prefills them), in the same
        forward as the cycle's first row, which reads them (each held by its own view, then by the cycle's alone)."""
        self.latest = None
        line, self.encode_s = measured(frame_line, timed, self.signed_bearings, self.aimed, self.encoder)
        self.stats.frame_encode_ms.append(round(self.encode_s * 1000.0, 3))
        prefills = [StreamInput(View(self.store, name=name, own_label=name), encode(self.tok, text), logits="none")
                    for name, text in (("status", status_line(timed.frame)), ("frame", line))]
        view = View(self.store, [self.system] + [x.view.own for x in prefills], name="sequential", own_label="cycle")
        if not self.think_tokens:  # no-think: the decision in this forward, like a multi-stream decision
            return self._decide(view, timed, self.action_prompt, None, prefills)
        (logits,), seconds = self._forward([StreamInput(view, self.thought_prompt)], prefills)
        self.cycle = (view, timed, self.think_tokens, logits)
        prefill = sum(len(x.tokens) for x in prefills) + len(self.thought_prompt)
        return StepOutcome([], seconds, 0, prefill, [("sequential", prefill)])

    def _decide(self, view: View, timed: TimedFrame, prompt: list[int], now_ms, prefills=()) -> StepOutcome:
        branches = self.scorer.branch_inputs(view)
        inputs = [StreamInput(view, prompt)] + branches
        logits, seconds = self._forward(inputs, prefills)
        command, _ = self.scorer.best(logits[0], logits[1:])
        for b in branches:
            b.view.close()
        view.close()  # frees the cycle's status and frame blocks too
        self.cycle = None
        self.stats.decisions += 1
        action = Action(command, self.generation.current, timed.frame.tic, timed.read_ms, now_ms, source=self.source)
        prefill = sum(len(x.tokens) for x in [*prefills, *inputs])
        return StepOutcome([action], seconds, 0, prefill, [("sequential", prefill)])

    def _forward(self, inputs, prefills=()):
        """One forward of `prefills` (blocks the inputs read, written in the same forward; their views closed after)
        and `inputs`; the inputs' logits."""
        result, seconds = measured(self.runner.forward, [*prefills, *inputs])
        seconds, self.encode_s = seconds + self.encode_s, 0.0
        for x in prefills:
            x.view.close()
        self.stats.steps += 1
        return result.logits[len(prefills):], seconds

    def close(self) -> None:
        if self.cycle is not None:
            self.cycle[0].close()
        self.store.release(self.system)


def run_sequential_episode(env: DoomEnv, runtime, *, think_tokens: int, seed: int | None = None,
                           max_tics: int | None = None, fixed_cost: FixedCost | None = None,
                           bus: EventBus | None = None, agent_seed: int = 0, progress=None) -> dict:
    """Read the newest frame, think, act; repeat. No action is fenced for age: an ordinary loop acts late."""
    return play_headless(env, SessionClock(fixed_cost), TimeBounds(max_frame_age_ms=2 * MS_PER_TIC),
                         lambda generation: SequentialAgent(runtime, generation, scenario=env.scenario,
                                                            think_tokens=think_tokens, seed=agent_seed),
                         bus=bus, progress=progress, seed=seed, max_tics=max_tics)[0]
