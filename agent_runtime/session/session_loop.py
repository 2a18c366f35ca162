"""The session loop: one loop for every way an agent plays, headless or live, model or not.

Per step: user input → agent.step → the world passes the step's time → the step's actions run (the executor
fences stale ones) → the frames read meanwhile go to the agent. It stops between two steps.
"""

from dataclasses import dataclass

from agent_runtime import signals
from agent_runtime.control.action_executor import ActionExecutor
from agent_runtime.session.clocks import RecordedCostsEnded
from agent_runtime.session.events import Kind
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.sync_world import SyncWorld
from agent_runtime.control.user_inputs import UserInput

PROGRESS_EVERY_MS = 2000.0
AGENT_COUNTS = ("frames_dropped", "frames_prefilled", "thinker_tokens", "thinker_paragraphs", "notes", "decisions",
                "decisions_with_note", "decisions_abandoned", "joint_decode_steps", "remarks_started", "remarks_stopped",
                "heard_commits")


@dataclass
class SessionTotals:
    episodes: int = 1
    steps: int = 0
    start_tic: int = 0
    end_tic: int = 0
    user_actions: int = 0  # user commands that acted directly
    pool_peak_pages: int = 0


class SessionLoop:
    def __init__(self, world, agent, executor, *, inputs=None, bus=None, progress=None, store=None):
        """bus: the one the agent and the executor were built with (its events follow the world's clock);
        progress(report) every couple of seconds of session time; store: the KV pool whose peak use is reported."""
        self.world, self.agent, self.executor, self.generation = world, agent, executor, executor.generation
        self.inputs, self.progress, self.store, self.bus = inputs, progress, store, bus
        if bus is not None:
            bus.clock = world.clock.name
        self.totals = SessionTotals()

    def run(self, *, record_path=None, seed=None, max_tics: int | None = None, seconds: float | None = None,
            next_episode=None) -> None:
        """next_episode(index, start) -> the first frame of episode `index` of a timed session, started by calling
        start(record_path) (it may switch recordings around that); without it the session ends with its episode."""
        t = self.totals
        with signals.stoppable():  # inside, a signal only sets the flag checked between two steps
            first = self.world.start(record_path, seed)
            t.start_tic = first.frame.tic
            self.agent.push_frame(first)
            next_report = PROGRESS_EVERY_MS
            while True:
                signals.check()  # SIGINT/SIGTERM: stop between two steps
                if self.world.env.episode_finished:
                    if next_episode is None or seconds is None:
                        break
                    first = next_episode(t.episodes, self.world.start)  # a timed live session keeps playing
                    self.agent.new_episode()
                    self.agent.push_frame(first)
                    t.episodes += 1
                now = self.world.clock.now_ms
                if (max_tics is not None and self.world.tic - t.start_tic >= max_tics) or (
                        seconds is not None and now >= seconds * 1000.0):
                    break
                try:
                    self._step(now)
                except RecordedCostsEnded:
                    break  # a replayed run ended here
                if self.progress is not None and self.world.clock.now_ms >= next_report:
                    next_report += PROGRESS_EVERY_MS
                    self.progress({"episode": t.episodes - 1, "tic": self.world.tic, "kills": self.world.env.kills,
                                   "reward": self.world.reward, "actions": self.executor.stats.executed})
            t.end_tic = self.world.tic

    def _step(self, now: float) -> None:
        t = self.totals
        if self.inputs is not None:
            for text in self.inputs.take_heard():
                self.agent.commit_heard(text)
            for item in self.inputs.take(t.steps):
                self.submit(item, now)
        outcome = self.agent.step(now)
        cost = self.world.pass_step(outcome)
        if cost is not None and self.bus is not None:
            self.bus.emit(Kind.CLOCK_ADVANCE, "engine", generation=self.generation.current, tic=self.world.tic,
                          sim_ms=now, step=t.steps, cost_ms=cost)
        for action in outcome.actions:
            self.executor.execute(action, self.world.clock.now_ms)
        for timed in self.world.take_frames():
            self.agent.push_frame(timed)
        t.steps += 1
        if self.store is not None:
            t.pool_peak_pages = max(t.pool_peak_pages, self.store.used_pages)

    def submit(self, item: UserInput, now: float) -> None:
        """One user input: recorded (in the generation it arrived in), then it interrupts; a command acts at once."""
        if self.bus is not None:
            self.bus.emit(Kind.USER_INPUT, "user", generation=self.generation.current, tic=self.world.tic,
                          sim_ms=now, step=self.totals.steps, text=item.text,
                          command=item.command.text if item.command else None)
        direct = self.agent.push_user_text(item.text, now, item.command)
        if direct is not None:
            self.executor.execute(direct, now)
            self.totals.user_actions += 1

    def result(self) -> dict:
        """One result schema for every session, headless or live, whoever plays (the keys every command prints): the
        last episode's reward, kills and tics; 0 for the counts of a stream the agent does not have."""
        stats, t, world, session_ms = self.agent.stats, self.totals, self.world, self.world.clock.now_ms
        return {
            "reward": round(world.reward, 4),
            "kills": world.env.kills,
            "tics": t.end_tic - t.start_tic,
            "episodes": t.episodes,
            **self.executor.stats.summary(),
            **{key: getattr(stats, key, 0) for key in AGENT_COUNTS},
            "engine_steps": getattr(stats, "steps", 0),
            "frame_encode_samples_ms": list(getattr(stats, "frame_encode_ms", [])),
            "user_actions": t.user_actions,
            "session_ms": session_ms,
            "seconds": session_ms / 1000.0,
            "clock": world.clock.name,
            "pool_peak_pages": t.pool_peak_pages,
            "pool_capacity_pages": self.store.num_pages if self.store is not None else None,
        }


def play_headless(env, clock, bounds, make_agent, *, inputs=None, bus=None, progress=None, store=None,
                  **run) -> tuple[dict, object]:
    """One headless episode on a SyncWorld, whoever plays: the agent make_agent(generation) builds (closed after
    the run) in the one loop; returns its result (SessionLoop.result) and the agent. run: SessionLoop.run's keywords.
    bus: where the loop and the executor record events (make_agent gives its agent the same one)."""
    world = SyncWorld(env, clock, bounds)
    generation = SessionGeneration()
    executor = ActionExecutor(world, generation, bounds, bus=bus)
    agent = make_agent(generation)
    loop = SessionLoop(world, agent, executor, inputs=inputs, bus=bus, progress=progress, store=store)
    try:
        loop.run(**run)
    finally:
        agent.close()
    return loop.result(), agent
