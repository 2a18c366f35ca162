"""One parser for what the user says: a typed line, `--user-text`, a recorded user script and a spoken phrase give
the same text the same command (or none), and the agent reads the text as words in every case."""

from __future__ import annotations

import io
import time

import pytest

from agent_runtime.control.action_grammar import ActionGrammar
from agent_runtime.control.user_inputs import LiveInputs, ScriptedInputs, UserInput
from agent_runtime.model.model_loader import load_tokenizer
from agent_runtime.recording.user_script import parse_user_text_args, user_script_from_events
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.live_session import TypedCommands
from agent_runtime.voice.voice_commands import command_for
from agent_runtime.voice.voice_io import VoiceCommand

BUTTONS = ("ATTACK", "TURN_LEFT", "TURN_RIGHT", "MOVE_FORWARD")
# text -> the command it names in BUTTONS' grammar (None: words for the agent only)
EXPECTED = {
    "TURN_LEFT": "TURN_LEFT 4", "turn left": "TURN_LEFT 4", "Turn  LEFT": "TURN_LEFT 4", "turn_right 2": "TURN_RIGHT 2",
    "ATTACK 3": "ATTACK 3", "shoot": "ATTACK 4", "go forward": "MOVE_FORWARD 4", "stop": "NOOP 4", "STOP 2": "NOOP 2",
    "NOOP 2": "NOOP 2", "go back": None, "what do you see": None, "look around": None, "JUMP": None,
    "TURN_LEFT 0": None, "enemy on the right, turn and shoot": None,
}


@pytest.fixture(scope="module")
def grammar():
    return ActionGrammar(BUTTONS, load_tokenizer())


def typed(text: str, grammar) -> list[UserInput]:
    """A line typed in `live`."""
    lines = TypedCommands(io.StringIO(text + "\n"))
    deadline = time.monotonic() + 5.0
    while not lines.lines and time.monotonic() < deadline:  # its reader thread
        time.sleep(0.005)
    return LiveInputs(grammar, typed=lines).take(0)


def user_text(text: str, grammar) -> list[UserInput]:
    """`episode --user-text 7:TEXT`: the script run_llm_episode plays."""
    return ScriptedInputs(parse_user_text_args([f"7:{text}"]), grammar).take(7)


def recorded(text: str, grammar) -> list[UserInput]:
    """The user_input event a session records for the typed text, re-run by `replay --rerun`."""
    (item,) = typed(text, grammar)
    bus = EventBus()
    bus.emit(Kind.USER_INPUT, "user", step=7, text=item.text, command=item.command.text if item.command else None)
    return ScriptedInputs(user_script_from_events(bus.events, grammar), grammar).take(7)


def spoken(text: str, grammar) -> list[UserInput]:
    """What `live --voice` takes when the recognizer heard the phrase (it names the phrase's command)."""

    class Heard:
        def take_commands(self):
            return [VoiceCommand(command_for(text), text)]

    return LiveInputs(grammar, voice=Heard()).take(0)


@pytest.mark.parametrize("text", list(EXPECTED))
def test_the_same_text_gives_the_same_input_through_every_path(grammar, text):
    paths = [typed, user_text, recorded] + ([spoken] if command_for(text) else [])
    for path in paths:
        (item,) = path(text, grammar)
        assert item.text == text, path.__name__  # the agent reads the words, a command or not
        assert (item.command.text if item.command else None) == EXPECTED[text], path.__name__
        if item.command is not None:  # the grammar's own command: the action log writes its word
            assert item.command in grammar.commands and item.command.word, path.__name__
