"""Live play: ViZDoom in real time, the multi-stream agent, typed or spoken commands, spoken commentary.

Between engine steps the loop releases due buttons, reads the newest frame, takes user commands (typed
lines or recognized voice; each bumps the generation first and acts directly on the next frame), commits
the commentary the user actually heard, and runs one engine step. Actions execute as soon as they are
emitted, unless the executor fences them.
"""

from __future__ import annotations

import sys
import threading
from collections import deque

from envs.doom_env import DoomEnv, EngineDied

from agent_runtime import signals
from agent_runtime.action_executor import ActionExecutor
from agent_runtime.action_grammar import Command
from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.multistream_agent import MultiStreamAgent, engine_options
from agent_runtime.notices import OncePerKind, stderr_line
from agent_runtime.realtime_world import RealTimeWorld
from agent_runtime.sync_world import TimedFrame
from agent_runtime.user_text_limits import MAX_PENDING_TYPED_LINES, MAX_USER_TEXT_CHARS
from agent_runtime.voice.voice_commands import command_for, command_to_buttons

USER_HOLD_TICS = 6


def user_command(name: str, buttons: tuple[str, ...]) -> Command | None:
    """A recognized command as an env action (None for DESCRIBE or a button the scenario lacks)."""
    pressed = command_to_buttons(name, buttons)
    if pressed is None:
        return None
    return Command(name, pressed, USER_HOLD_TICS)


class TypedCommands:
    """Lines typed on stdin while playing (a thread, so the engine never waits for the keyboard).

    Bounded: a line is read at most MAX_USER_TEXT_CHARS at a time (the rest of an endless line is skipped, never
    held), and at most MAX_PENDING_TYPED_LINES wait for the engine loop (older ones are dropped); each is said
    once a session with one line.
    """

    def __init__(self, stream=None, notify=None):
        self.lines: deque[str] = deque(maxlen=MAX_PENDING_TYPED_LINES)
        self._lock = threading.Lock()
        self.stream = stream or sys.stdin
        self.cut = self.dropped = 0
        self._notice = OncePerKind(notify or stderr_line)
        threading.Thread(target=self._read, daemon=True, name="typed-commands").start()

    def _read(self) -> None:
        while True:
            line = self.stream.readline(MAX_USER_TEXT_CHARS + 1)
            if not line:
                return
            if len(line) > MAX_USER_TEXT_CHARS and not line.endswith("\n"):
                length = len(line) + self._skip_rest_of_line()
                line = line[:MAX_USER_TEXT_CHARS]
                self.cut += 1
                self._notice("cut", f"typed command too long ({length} characters): kept its first "
                                    f"{MAX_USER_TEXT_CHARS}; commands are short, e.g. 'turn left'")
            if line.strip():
                self._put(line.strip())

    def _skip_rest_of_line(self) -> int:
        """Read past the end of the line (never holding more than a chunk); its characters, without the newline."""
        skipped = 0
        while True:
            chunk = self.stream.readline(64 * 1024)
            skipped += len(chunk.rstrip("\n"))
            if not chunk or chunk.endswith("\n"):
                return skipped

    def _put(self, line: str) -> None:
        with self._lock:
            if len(self.lines) == self.lines.maxlen:
                self.dropped += 1
                self._notice("dropped", f"typed lines arrive faster than the game takes them; older ones are "
                                        f"dropped (more than {MAX_PENDING_TYPED_LINES} waiting)")
            self.lines.append(line)

    def take(self) -> list[str]:
        with self._lock:
            out = list(self.lines)
            self.lines.clear()
        return out


@signals.stoppable()
def run_live(env: DoomEnv, runtime, *, seconds: float | None = None, voice=None, typed: TypedCommands | None = None,
             generation: SessionGeneration | None = None, bus: EventBus | None = None, progress=None,
             record_path=None, recordings=None, notify=stderr_line) -> dict:
    """record_path: the first episode's .lmp. recordings (a LiveRecordings) instead records every episode of a
    timed session in its own directory: its bus and .lmp path replace bus and record_path. notify(line): where
    the agent's once-a-session lines about cut or dropped user text go."""
    if recordings is not None:
        bus, record_path = recordings.bus, recordings.lmp_path
    config = runtime.config
    generation = generation or (voice.session if voice is not None else SessionGeneration())
    world = RealTimeWorld(env)
    if bus is not None:
        bus.clock = "realtime"
    executor = ActionExecutor(world, generation, max_action_age_ms=config.budgets.max_action_age_ms, bus=bus)
    agent = MultiStreamAgent(runtime.runner, runtime.loaded.tokenizer, runtime.grammar, config.budgets, generation,
                             scenario=env.scenario, bus=bus, commentary=voice is not None,
                             on_sentence=voice.say if voice is not None else None, notify=notify,
                             **engine_options(config.engine))
    user_actions = 0
    try:
        first = env.new_episode(record_path)
        world.t0 = first.t_read
        agent.push_frame(TimedFrame(first, 0.0))
        if voice is not None:
            voice.start()
        last_report = 0.0
        episodes = 1
        while seconds is None or world.now_ms() < seconds * 1000.0:
            signals.check()  # SIGINT/SIGTERM: stop between two steps
            if world.finished:
                if seconds is None:
                    break
                # a timed session keeps playing: the next episode starts at once, in its own recording
                if recordings is not None:
                    recordings.start(episodes)
                    bus = agent.bus = executor.bus = recordings.bus
                    bus.clock = "realtime"
                env.new_episode(recordings.lmp_path if recordings is not None else None)
                if recordings is not None:
                    recordings.previous_finished()
                agent.new_episode()
                episodes += 1
            world.release_if_due()
            timed = world.read()
            if timed is not None:
                agent.push_frame(timed)
            now = world.now_ms()
            texts = [(line, command_for(line)) for line in (typed.take() if typed else [])]
            if voice is not None:
                texts += [(c.text, c.command) for c in voice.take_commands()]
                for text in voice.take_heard():
                    agent.commit_heard(text)
            for text, name in texts:
                command = user_command(name, env.buttons) if name else None
                direct = agent.push_user_text(text, now, command)
                if bus is not None:
                    bus.emit("user_input", "user", generation=generation.current, tic=env.tic, sim_ms=now,
                             text=text, command=name)
                if direct is not None:
                    executor.execute(direct, now)
                    user_actions += 1
            outcome = agent.step(world.now_ms())
            for action in outcome.actions:
                executor.execute(action, world.now_ms())
            if progress is not None and world.now_ms() - last_report > 2000:
                last_report = world.now_ms()
                progress(env.tic, env.kills, executor.stats.executed)
    except (EngineDied, signals.Interrupted) as e:  # the session ends early: its recording says why
        if recordings is not None:
            recordings.end_reason = e.reason if isinstance(e, signals.Interrupted) else "engine_died"
            recordings.end_detail = str(e)
        raise
    finally:
        agent.close()
        if voice is not None:
            voice.close()
    e, s = executor.stats, agent.stats
    return {
        "episodes": episodes,
        "reward": env.total_reward,
        "kills": env.kills,
        "seconds": world.now_ms() / 1000.0,
        "frames_dropped": s.frames_dropped,
        **{k: v for k, v in e.summary().items() if k != "reaction_samples_ms"},
        "thinker_tokens": s.thinker_tokens,
        "remarks_started": s.remarks_started,
        "remarks_stopped": s.remarks_stopped,
        "heard_commits": s.heard_commits,
        "user_actions": user_actions,
        **({"voice_device_losses": voice.devices.losses} if voice is not None else {}),
    }
