"""Typed user input as a script: {engine step: (text, Command | None)}, from the CLI or from a recording.

A rerun feeds a recording's user_input events at the same engine steps, the command rebuilt from the grammar.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_runtime.control.action_grammar import NOOP, ActionGrammar, Command
from agent_runtime.errors import UserError
from agent_runtime.session.events import Event

UserScript = dict[int, tuple[str, Command | None]]


def command_for_text(grammar: ActionGrammar, text: str | None) -> Command | None:
    """The grammar's command spelled `text` ("TURN_LEFT", "ATTACK 3"), or None when it is not one."""
    words = (text or "").strip().upper().split()
    if not 1 <= len(words) <= 2 or (words[0] not in grammar.buttons and words[0] != NOOP):
        return None
    if len(words) == 2 and not (words[1].isdigit() and int(words[1]) >= 1):
        return None
    name, tics = words[0], int(words[1]) if len(words) == 2 else grammar.default_tics
    return next((c for c in grammar.commands if c.name == name and c.tics == tics),
                Command(name, {} if name == NOOP else {name: 1.0}, tics))


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
        command = command_for_text(grammar, recorded_command) if recorded_command else None
        if recorded_command and command is None:
            raise UserError(f"user_input event seq {event.seq}: command {recorded_command!r} is not in this "
                            f"scenario's action grammar")
        script[step] = (text, command)
    return script
