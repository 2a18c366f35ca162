"""The texts the streams are primed with. Short: every token is prefill time."""


def encode(tokenizer, text: str) -> list[int]:
    """A text's tokens, without the special tokens a whole sequence gets: every text here is a piece of one."""
    return tokenizer.encode(text, add_special_tokens=False)


def system_prompt(scenario: str, commands: str) -> str:
    """commands: the grammar's list of command words with their buttons (ActionGrammar.describe())."""
    return (
        f"You are playing Doom ({scenario}). Observation lines give health, ammo and the enemies you see "
        "with side, bearing in degrees and distance (near, mid, far). "
        f"Thought lines plan briefly. Act lines give one command: {commands}; "
        "optionally followed by how many tics to hold it.\n"
    )


FRAME_PREFIX = "\n"  # frame lines are what is in view, bare: every token is reaction time
STATUS_PREFIX = "\n"  # the own status ("hp 100 ammo 26") sits in a block of its own, renewed when it changes
THOUGHT_PROMPT = "\nThought:"
ACTION_PROMPT = "\nAct:"
USER_PREFIX = "\nUser: "
COMMENTARY_PROMPT = "\nSay:"
HEARD_PREFIX = "\nSaid: "


def thought_text(paragraph: str) -> str:
    """What the Thinker wrote in a paragraph (its block's text), without the prompt it was primed with."""
    return paragraph.split(THOUGHT_PROMPT.strip(), 1)[-1].strip()
