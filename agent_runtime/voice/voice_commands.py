"""The spoken command set: phrases, their command strings, the JSGF grammar, and env buttons.

A ~10-phrase closed grammar got 98-100% where free-vocabulary pocketsphinx missed most commands. It always
returns its nearest phrase: a hypothesis is not a command without the VAD/endpointing context.
"""

from __future__ import annotations

# phrase (lower case, words in the pocketsphinx dictionary) -> command string
PHRASES: dict[str, str] = {
    "turn left": "TURN_LEFT",
    "turn right": "TURN_RIGHT",
    "shoot": "ATTACK",
    "go forward": "MOVE_FORWARD",
    "go back": "MOVE_BACKWARD",
    "move left": "MOVE_LEFT",
    "move right": "MOVE_RIGHT",
    "stop": "STOP",
    "what do you see": "DESCRIBE",
    "open the door": "USE",
}

COMMANDS: tuple[str, ...] = tuple(dict.fromkeys(PHRASES.values()))

# Delta-button fallbacks when a scenario has no binary button for a motion (degrees / units per tic).
_DELTA_FALLBACK = {
    "TURN_LEFT": ("TURN_LEFT_RIGHT_DELTA", -10.0),
    "TURN_RIGHT": ("TURN_LEFT_RIGHT_DELTA", 10.0),
    "MOVE_FORWARD": ("MOVE_FORWARD_BACKWARD_DELTA", 10.0),
    "MOVE_BACKWARD": ("MOVE_FORWARD_BACKWARD_DELTA", -10.0),
    "MOVE_LEFT": ("MOVE_LEFT_RIGHT_DELTA", -10.0),
    "MOVE_RIGHT": ("MOVE_LEFT_RIGHT_DELTA", 10.0),
}


def jsgf_grammar() -> str:
    """The JSGF text pocketsphinx decodes against: one public rule, one alternative per phrase."""
    return f"#JSGF V1.0;\ngrammar commands;\npublic <command> = {' | '.join(PHRASES)} ;\n"


def normalize(text: str) -> str:
    return " ".join(text.lower().replace("(", " ").replace(")", " ").split())


def command_for(text: str) -> str | None:
    """The command string a recognized text means, or None when it is not a whole phrase."""
    return PHRASES.get(normalize(text))


def command_to_buttons(command: str, buttons: tuple[str, ...]) -> dict[str, float] | None:
    """Button values for a voice command ({"TURN_LEFT": 1.0}, ...); {} for STOP (release everything); None when
    the scenario has no button for it or the command is not an action (DESCRIBE)."""
    if command == "DESCRIBE":  # not an env action: it goes to the language model
        return None
    if command == "STOP":
        return {}
    if command in buttons:
        return {command: 1.0}
    button, delta = _DELTA_FALLBACK.get(command, (None, 0.0))
    return {button: delta} if button in buttons else None
