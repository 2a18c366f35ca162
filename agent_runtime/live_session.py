"""Live play: ViZDoom in real time, the multi-stream agent, typed or spoken commands, spoken or printed remarks.

The session loop (session_loop.py) on a RealTimeWorld.
"""

from __future__ import annotations

import sys
import threading
from collections import deque

from envs.doom_env import DoomEnv, EngineDied

from agent_runtime import signals
from agent_runtime.action_executor import ActionExecutor
from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.multistream_agent import MultiStreamAgent, engine_options
from agent_runtime.notices import OncePerKind, stderr_line
from agent_runtime.realtime_world import RealTimeWorld
from agent_runtime.session_loop import SessionLoop
from agent_runtime.session_result import session_result
from agent_runtime.user_inputs import LiveInputs
from agent_runtime.user_text_limits import MAX_PENDING_TYPED_LINES, MAX_USER_TEXT_CHARS


class TypedCommands:
    """Lines typed on stdin while playing (a thread, so the engine never waits for the keyboard). Bounded: at most
    MAX_USER_TEXT_CHARS of a line (the rest is skipped) and MAX_PENDING_TYPED_LINES waiting (older ones dropped)."""

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
             record_path=None, recordings=None, notify=stderr_line, print_commentary=stderr_line) -> dict:
    """record_path: the first episode's .lmp. recordings (a LiveRecordings) instead records every episode of a
    timed session in its own directory: its bus and .lmp path replace bus and record_path. notify(line): where
    the agent's once-a-session lines about cut or dropped user text go; print_commentary(line): where remarks go
    without voice (None: no commentary)."""
    if recordings is not None:
        bus, record_path = recordings.bus, recordings.lmp_path
    config = runtime.config
    generation = generation or (voice.session if voice is not None else SessionGeneration())
    world = RealTimeWorld(env)
    executor = ActionExecutor(world, generation, runtime.time_bounds())
    printed = PrintedCommentary(generation, print_commentary) if voice is None and print_commentary else None
    speaker = voice if voice is not None else printed
    agent = MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, config.budgets, generation,
                             scenario=env.scenario, commentary=speaker is not None, notify=notify,
                             on_sentence=speaker.say if speaker is not None else None, **engine_options(config.engine))
    inputs = LiveInputs(runtime.grammar, typed=typed, voice=voice, printed=printed)
    loop = SessionLoop(world, agent, executor, generation=generation, inputs=inputs, bus=bus, progress=progress,
                       store=runtime.store)

    def next_episode(index: int, start):
        if recordings is None:
            return start(None)
        recordings.start(index)
        loop.use_bus(recordings.bus)
        first = start(recordings.lmp_path)
        recordings.previous_finished()
        return first

    try:
        if voice is not None:
            voice.start()
        totals = loop.run(record_path=record_path, seconds=seconds, next_episode=next_episode)
    except (EngineDied, signals.Interrupted) as e:  # the session ends early: its recording says why
        if recordings is not None:
            recordings.end_reason = e.reason if isinstance(e, signals.Interrupted) else "engine_died"
            recordings.end_detail = str(e)
        raise
    finally:
        agent.close()
        if voice is not None:
            voice.close()
    result = session_result(world, executor, agent, totals, store=runtime.store)
    result.pop("reaction_samples_ms")
    if voice is not None:
        result["voice_device_losses"] = voice.devices.losses
    return result
