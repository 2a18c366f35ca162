"""The multi-stream agent in a gymnasium loop: a screen observation in, a discrete action out.

For `envs.gym_env.DoomGymEnv` (observation_mode "screen": no label buffer): each observation is a frame read at its
tic; one engine step prefills it (its frame line from the screen, by the runtime's frame encoder) and, when a
decision is due, decides on it in the same forward. The chosen command's button is the action, repeated for its
hold; between decisions the Thinker goes on in the steps. Health and ammo come from the HUD variables in `info`.
"""

import time

from envs.frame import Frame

from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.session.clocks import MS_PER_TIC
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.sync_world import TimedFrame


class GymAgent:
    def __init__(self, runtime, action_names, *, scenario: str, frame_skip: int = 1, seed: int = 0):
        """runtime: session/runtime.py's (Runtime.open(config, scenario=..., labels=False)); action_names: the gym
        env's (DoomGymEnv.action_names), whose entries are button names."""
        config = runtime.config
        self.agent = MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, SessionGeneration(),
                                      engine=config.engine, budgets=config.budgets, scenario=scenario, seed=seed,
                                      frame_encoder=runtime.frame_encoder, vision=runtime.vision)
        self.index = {name: i for i, name in enumerate(action_names)}
        self.frame_skip, self.held, self.decisions = frame_skip, (0, 0), 0

    def act(self, screen, info: dict) -> int:
        """The action for this observation: a new decision's, else the hold under way's, else 0 (no button)."""
        tic = int(info.get("tic", 0))
        frame = Frame(tic, time.monotonic(), screen, (), dict(info.get("variables", {})), 0)
        now_ms = tic * MS_PER_TIC
        self.agent.push_frame(TimedFrame(frame, now_ms))
        outcome = self.agent.step(now_ms)
        if outcome.actions:
            command = outcome.actions[-1].command
            self.decisions += 1
            self.held = (self.index.get(command.name, 0), max(1, command.tics // self.frame_skip))
        action, left = self.held
        self.held = (action, left - 1) if left > 1 else (0, 0)
        return action if left > 0 else 0

    def reset(self) -> None:
        """A new episode (env.reset()): its tics start over; old frames leave the views."""
        self.agent.new_episode()
        self.held = (0, 0)

    def close(self) -> None:
        self.agent.close()
