"""Live play: ViZDoom in real time, the multi-stream agent, typed or spoken commands, spoken or printed remarks.

The session loop (session/session_loop.py) on a RealTimeWorld, the world of live play.
"""

import sys
import threading
from collections import deque

from envs.doom_env import DoomEnv, EngineDied

from agent_runtime import signals
from agent_runtime.control.action_executor import ActionExecutor
from agent_runtime.session.clocks import MS_PER_TIC, WallClock
from agent_runtime.session.events import BusRelay, EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.notices import OncePerKind, stderr_line, warning_line
from agent_runtime.session.session_loop import SessionLoop
from agent_runtime.engine.streams.text_in import MAX_PENDING_TYPED_LINES, MAX_USER_TEXT_CHARS
from agent_runtime.session.sync_world import EnvWorld, TimedFrame
from agent_runtime.control.user_inputs import LiveInputs


class RealTimeWorld(EnvWorld):
    """ViZDoom in real time (ASYNC_PLAYER): the world runs at 35 tics/s by itself while the model computes. Held
    buttons are released (an explicit all-zero action, as ViZDoom 1.3.2 needs) once their tics have passed."""

    def __init__(self, env: DoomEnv):
        if env.clock != "realtime":
            raise ValueError("RealTimeWorld needs a DoomEnv with clock='realtime'")
        super().__init__(env, WallClock())
        self._release_at: float | None = None
        self._started = False

    @property
    def reward(self) -> float:
        return self.env.total_reward

    def start(self, record_path=None, seed=None) -> TimedFrame:
        """A new episode; session time starts at the first one's first frame."""
        first = self.env.new_episode(record_path)
        self.turns.clear()
        if not self._started:
            self.clock.t0, self._started = first.t_read, True
        return TimedFrame(first, self.clock.ms(first.t_read))

    def hold(self, buttons: dict, tics: int) -> None:
        """Press now (applied at the next tic); release after `tics` tics."""
        self.env.game.set_action(self.env.action_vector(buttons))
        self._release_at = self.clock.now_ms + tics * MS_PER_TIC
        self.turns.record(buttons, tics, self.tic)

    def pass_step(self, outcome) -> None:
        """Nothing to charge: the world ran by itself while the step computed."""

    def take_frames(self) -> list[TimedFrame]:
        """Release buttons that are due, then the newest frame (waits at most one tic), stamped when it was read."""
        if self._release_at is not None and self.clock.now_ms >= self._release_at:
            self.env.game.set_action(self.env.action_vector({}))
            self._release_at = None
        frame = self.env.read_frame()
        if frame is None:
            return []
        return [TimedFrame(frame, self.clock.ms(frame.t_read), self.turns.degrees_after(frame.tic))]


class TypedCommands:
    """Lines typed on stdin while playing (a thread, so the engine never waits for the keyboard). Bounded: at most
    MAX_USER_TEXT_CHARS of a line (the rest is skipped) and MAX_PENDING_TYPED_LINES waiting (older ones dropped)."""

    def __init__(self, stream=None, notify=None):
        self.lines: deque[str] = deque(maxlen=MAX_PENDING_TYPED_LINES)
        self._lock = threading.Lock()
        self.stream = stream or sys.stdin
        self.cut = self.dropped = 0
        self._notice = OncePerKind(notify or warning_line)
        threading.Thread(target=self._read, daemon=True, name="typed-commands").start()

    def _read(self) -> None:
        while True:
            line = self.stream.readline(MAX_USER_TEXT_CHARS + 1)
            if not line:
                return
            if len(line) > MAX_USER_TEXT_CHARS and not line.endswith("\n"):
                length, chunk = len(line), line
                while chunk and not chunk.endswith("\n"):  # past the line's end, never holding more than a chunk
                    chunk = self.stream.readline(64 * 1024)
                    length += len(chunk.rstrip("\n"))
                line = line[:MAX_USER_TEXT_CHARS]
                self.cut += 1
                self._notice("cut", f"typed command too long ({length} characters): kept its first "
                                    f"{MAX_USER_TEXT_CHARS}; commands are short, e.g. 'turn left'")
            if not line.strip():
                continue
            with self._lock:
                if len(self.lines) == self.lines.maxlen:
                    self.dropped += 1
                    self._notice("dropped", f"typed lines arrive faster than the game takes them; older ones are "
                                            f"dropped (more than {MAX_PENDING_TYPED_LINES} waiting)")
                self.lines.append(line.strip())

    def take(self) -> list[str]:
        with self._lock:
            out = list(self.lines)
            self.lines.clear()
        return out


class PrintedCommentary:
    """Live play without voice: the agent's remarks as text lines, under the same generations as speech (a
    sentence of an interrupted remark is never printed); what was printed is what the user heard."""

    def __init__(self, generation: SessionGeneration, write=stderr_line):
        self.generation, self.write = generation, write
        self._printed: list[str] = []

    def say(self, text: str, generation: int) -> None:
        if self.generation.is_current(generation):
            self.write(f"agent: {text}")
            self._printed.append(text)

    def take_heard(self) -> list[str]:
        printed, self._printed = self._printed, []
        return printed


def run_live(env: DoomEnv, runtime, *, seconds: float | None = None, voice=None, typed: TypedCommands | None = None,
             generation: SessionGeneration | None = None, bus: EventBus | None = None, progress=None,
             record_path=None, recordings=None, notify=warning_line, print_commentary=stderr_line) -> dict:
    """record_path: the first episode's .lmp. recordings (a LiveRecordings) instead records every episode of a
    timed session in its own directory: its bus and .lmp path replace bus and record_path. notify(line): where
    the agent's once-a-session lines about cut or dropped user text go; print_commentary(line): where remarks go
    without voice (None: no commentary)."""
    if recordings is not None:  # every episode's events go to its own recording, through one relay
        bus, record_path = BusRelay(recordings.bus), recordings.lmp_path
    config = runtime.config
    generation = generation or (voice.session if voice is not None else SessionGeneration())
    world = RealTimeWorld(env)
    executor = ActionExecutor(world, generation, runtime.time_bounds(), bus=bus)
    printed = PrintedCommentary(generation, print_commentary) if voice is None and print_commentary else None
    speaker = voice if voice is not None else printed
    agent = MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, generation, engine=config.engine,
                             budgets=config.budgets, scenario=env.scenario, commentary=speaker is not None,
                             on_sentence=speaker.say if speaker is not None else None, bus=bus, notify=notify,
                             frame_encoder=runtime.frame_encoder, vision=runtime.vision)
    inputs = LiveInputs(runtime.grammar, typed=typed, voice=voice, printed=printed)
    loop = SessionLoop(world, agent, executor, inputs=inputs, bus=bus, progress=progress, store=runtime.store)

    def next_episode(index: int, start):
        if recordings is None:
            return start(None)
        recordings.start(index)
        bus.switch(recordings.bus)
        first = start(recordings.lmp_path)
        recordings.previous_finished()
        return first

    try:
        if voice is not None:
            voice.start()
        loop.run(record_path=record_path, seconds=seconds, next_episode=next_episode)
    except (EngineDied, signals.Interrupted) as e:  # the session ends early: its recording says why
        if recordings is not None:
            recordings.end_reason = e.reason if isinstance(e, signals.Interrupted) else "engine_died"
            recordings.end_detail = str(e)
        raise
    finally:
        agent.close()
        if voice is not None:
            voice.close()
    result = loop.result()
    result.pop("reaction_samples_ms")
    result.pop("frame_encode_samples_ms")
    if voice is not None:
        result["voice_device_losses"] = voice.devices.losses
    return result
