"""Typed user input as a script by engine step: {step: text} from --user-text, {step: (text, Command | None)} from a
recording.

A rerun feeds a recording's user_input events at the same engine steps, the recorded command rebuilt by the one
parser (control/user_inputs.py), so a text recorded as words stays words.
"""

from collections.abc import Iterable

from agent_runtime.control.action_grammar import ActionGrammar, Command
from agent_runtime.control.user_inputs import user_command
from agent_runtime.errors import UserError
from agent_runtime.session.events import Event

UserScript = dict[int, tuple[str, Command | None]]


def parse_user_text_args(values: Iterable[str] | None) -> dict[int, str]:
    """--user-text STEP:TEXT (repeatable) -> {step: text}; UserError on a malformed value."""
    script: dict[int, str] = {}
    for value in values or ():
        step, sep, text = value.partition(":")
        if not sep or not step.strip().isdigit() or not text.strip():
            raise UserError(f"--user-text {value!r}: expected STEP:TEXT, e.g. 40:TURN_LEFT or '80:look for enemies'")
        if int(step) in script:
            raise UserError(f"--user-text: engine step {int(step)} is given twice")
        script[int(step)] = text.strip()
    return script


def user_script_from_events(events: Iterable[Event], grammar: ActionGrammar) -> UserScript:
    """The recorded user_input events as the script that replays them (the recorded command text wins)."""
    script: UserScript = {}
    for event in (e for e in events if e.kind == "user_input"):
        step, text = event.payload.get("step"), event.payload.get("text")
        if not isinstance(step, int) or not isinstance(text, str):
            raise UserError(f"user_input event seq {event.seq} has no integer 'step' and string 'text'; "
                            "it cannot be re-run")
        recorded_command = event.payload.get("command")
        command = user_command(recorded_command, grammar) if recorded_command else None
        if recorded_command and command is None:
            raise UserError(f"user_input event seq {event.seq}: command {recorded_command!r} is not in this "
                            f"scenario's action grammar")
        script[step] = (text, command)
    return script
