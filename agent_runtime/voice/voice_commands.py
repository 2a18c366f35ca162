"""The spoken command set: phrases, their command strings and the JSGF grammar (control/user_inputs.py turns a
command string into the scenario's command, as it does typed text).

A ~10-phrase closed grammar got 98-100% where free-vocabulary pocketsphinx missed most commands. It always
returns its nearest phrase: a hypothesis is not a command without the VAD/endpointing context.
"""

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
    "how much ammo": "DESCRIBE",  # questions: words for the commentary to answer at once, no button
    "open the door": "USE",
}


def jsgf_grammar() -> str:
    """The JSGF text pocketsphinx decodes against: one public rule, one alternative per phrase."""
    return f"#JSGF V1.0;\ngrammar commands;\npublic <command> = {' | '.join(PHRASES)} ;\n"


def normalize(text: str) -> str:
    return " ".join(text.lower().replace("(", " ").replace(")", " ").split())


def command_for(text: str) -> str | None:
    """The command string a recognized text means, or None when it is not a whole phrase."""
    return PHRASES.get(normalize(text))
