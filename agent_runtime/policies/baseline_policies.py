"""Non-LLM reference players: random (the floor), scripted aim-and-shoot from labels, the lag-aware expert, and the
view expert (what `collect` labels with), with or without the planner's notes."""

import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from envs.doom_env import DoomEnv
from envs.frame import Frame

from agent_runtime.control.action_executor import Action
from agent_runtime.control.action_grammar import Command
from agent_runtime.session.clocks import SessionClock
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.engine.multistream_agent import AgentStats, StepOutcome
from agent_runtime.policies.expert_policy import Decision, LagAwareExpertPolicy, frame_width, pixels_to_degrees
from agent_runtime.policies.view_expert import ViewExpertPolicy
from agent_runtime.session.session_loop import play_headless
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.session.time_bounds import TimeBounds

DELTA_BUTTON = "TURN_LEFT_RIGHT_DELTA"


class RandomPolicy:
    """Each decision presses every button with probability 1/2 (delta buttons: a uniform value in ±10) for one tic."""

    name = "random"

    def __init__(self, buttons: Sequence[str], seed: int | None = None):
        self.buttons = tuple(buttons)
        self._rng = np.random.default_rng(seed)

    def decide(self, frame: Frame) -> Decision:
        pressed: dict[str, float] = {}
        for name in self.buttons:
            if name.endswith("_DELTA"):
                pressed[name] = float(self._rng.uniform(-10.0, 10.0))
            elif self._rng.random() < 0.5:
                pressed[name] = 1.0
        return pressed, 1


class ScriptedAimPolicy:
    """Turn toward the monster nearest the crosshair, fire once the crosshair is on it (its centre within 2 px or a
    quarter of its width); scan when none is seen.

    Uses TURN_LEFT_RIGHT_DELTA (degrees, positive = right) when the scenario has it, else
    TURN_LEFT/TURN_RIGHT. Acts one tic at a time so it can correct every frame.
    """

    name = "scripted"

    def __init__(self, buttons: Sequence[str], *, screen_width: int = 160):
        self.buttons = tuple(buttons)
        self.screen_width = screen_width
        self.has_delta = DELTA_BUTTON in self.buttons
        self.can_turn = self.has_delta or {"TURN_LEFT", "TURN_RIGHT"} <= set(self.buttons)
        self._scan = "TURN_RIGHT"

    def decide(self, frame: Frame) -> Decision:
        monsters = [lab for lab in frame.labels if lab.category == "Monster" and lab.box is not None]
        if not monsters:
            return self._turn_degrees(-10.0 if self._scan == "TURN_LEFT" else 10.0), 1
        width = frame_width(frame, self.screen_width)
        target = min(monsters, key=lambda lab: (abs(lab.box_center_x - width / 2.0), lab.object_id))
        offset_px = target.box_center_x - width / 2.0  # positive: target right of the crosshair
        if abs(offset_px) > max(2.0, target.box[2] / 4.0):
            self._scan = "TURN_RIGHT" if offset_px > 0 else "TURN_LEFT"
            return self._turn_degrees(pixels_to_degrees(offset_px, width)), 1
        return ({"ATTACK": 1.0} if "ATTACK" in self.buttons else {}), 1

    def _turn_degrees(self, degrees: float) -> dict[str, float]:
        if not self.can_turn:
            return {}
        if self.has_delta:
            return {DELTA_BUTTON: degrees}
        return {"TURN_RIGHT" if degrees > 0 else "TURN_LEFT": 1.0}


BASELINE_POLICIES = ("expert", "view_expert", "view_expert_noted", "random", "scripted")


def make_policy(name: str, buttons: Sequence[str], *, seed: int | None = None, screen_width: int = 160):
    """Baseline policy by CLI name."""
    if name == "random":
        return RandomPolicy(buttons, seed)
    if name == "scripted":
        return ScriptedAimPolicy(buttons, screen_width=screen_width)
    if name == "expert":
        return LagAwareExpertPolicy(buttons, screen_width=screen_width)
    if name in ("view_expert", "view_expert_noted"):
        return ViewExpertPolicy(buttons, noted=name == "view_expert_noted")
    *others, last = BASELINE_POLICIES
    raise ValueError(f"unknown baseline policy '{name}'; use {', '.join(others)} or {last}")


class PolicyAgent:
    """A player without a model, in the session loop: it decides at once (no compute time) on the frame
    `lag_tics` old, and looks again when the hold it chose has run out."""

    def __init__(self, policy, generation: SessionGeneration, *, lag_tics: int = 0):
        self.policy, self.generation, self.lag_tics = policy, generation, lag_tics
        self.name = getattr(policy, "name", type(policy).__name__)
        self.history: deque[Frame] = deque(maxlen=lag_tics + 1)  # every frame read, up to the one `lag_tics` old
        self.newest: TimedFrame | None = None
        self.next_tic = -1
        self.stats = AgentStats()  # decisions count here

    def push_frame(self, timed: TimedFrame) -> None:
        self.newest = timed
        self.history.append(timed.frame)

    def new_episode(self) -> None:
        self.history.clear()
        self.newest, self.next_tic = None, -1

    def step(self, now_ms: float) -> StepOutcome:
        timed = self.newest
        if timed is None or timed.frame.tic < self.next_tic:
            return StepOutcome([], 0.0, 0, 0, [])  # idle: the world moves a tic
        frame = timed.frame
        seen = next((f for f in reversed(self.history) if f.tic <= frame.tic - self.lag_tics), self.history[0])
        buttons, tics = self.policy.decide(seen)
        self.next_tic = frame.tic + tics
        self.stats.decisions += 1
        command = Command(self.name, buttons, tics)
        action = Action(command, self.generation.current, frame.tic, timed.read_ms, now_ms, source=self.name)
        return StepOutcome([action], 0.0, 0, 0, [(self.name, 0)])  # decided at once: costs no time

    def close(self) -> None:
        pass


def run_baseline_episode(env: DoomEnv, policy, *, max_tics: int | None = None, lag_tics: int = 0,
                         progress: Callable[[dict], None] | None = None, record_path=None, bus=None) -> dict:
    """Play one new episode with `policy`; the policy sees the frame from `lag_tics` tics ago (a slow thinker: at
    35 tics/s, lag_tics=4 is ~114 ms of staleness)."""
    started = time.monotonic()
    result, agent = play_headless(env, SessionClock(), TimeBounds(max_frame_age_ms=0.0),  # the newest frame only
                                  lambda generation: PolicyAgent(policy, generation, lag_tics=lag_tics), bus=bus,
                                  progress=progress, record_path=record_path, max_tics=max_tics)
    last = agent.newest.frame
    return {**result, "scenario": env.scenario, "policy": agent.name, "episode": env.episode,
            "seed": env.episode_seed, "end_tic": env.tic, "health": last.health, "ammo": last.ammo,
            "lag_tics": lag_tics, "finished": env.episode_finished, "wall_s": round(time.monotonic() - started, 3)}
