"""What the user says to the agent, one parser for typed and spoken words, `--user-text` and recorded user scripts.

Every text reaches the agent as words; a text that names a command of the scenario's grammar also acts at once on
the newest frame: a button name with an optional hold ("TURN_LEFT", "ATTACK 3", "NOOP 2"), a spoken phrase
("turn left", "stop": hold no button) or a voice command's name ("STOP 4"). Sources: a script by engine step
(--user-text, replays), typed lines and recognized speech (live).
"""

from dataclasses import dataclass

from agent_runtime.control.action_grammar import NOOP, ActionGrammar, Command
from agent_runtime.voice.voice_commands import command_for


@dataclass(frozen=True)
class UserInput:
    text: str
    command: Command | None  # acts at once on the newest frame; None: words for the agent to read


def user_command(text: str | None, grammar: ActionGrammar) -> Command | None:
    """The command `text` names in `grammar` (the one rule for every source), or None when it is words only: a
    phrase at the default hold, or one word with an optional hold count of at least 1."""
    words = (text or "").strip().upper().split()
    name, tics = command_for(text or ""), grammar.default_tics
    if name is None and 1 <= len(words) <= 2 and (len(words) == 1 or (words[1].isdigit() and int(words[1]) >= 1)):
        name, tics = words[0], int(words[1]) if len(words) == 2 else tics
    name = NOOP if name == "STOP" else name  # release everything: hold no button
    if name not in grammar.buttons and name != NOOP:
        return None
    return next((c for c in grammar.commands if c.name == name and c.tics == tics),
                Command(name, {} if name == NOOP else {name: 1.0}, tics))


QUESTION_WORDS = frozenset({"what", "how", "where", "which", "who", "when", "why", "is", "are", "do", "does", "can"})


def is_question(text: str | None) -> bool:
    """A text the commentary answers at once: it ends in "?" or starts with a question word (the spoken "what do you
    see", "how much ammo")."""
    text = (text or "").strip()
    return bool(text) and (text.endswith("?") or text.split()[0].lower() in QUESTION_WORDS)


class ScriptedInputs:
    """{engine step: text or (text, command)}: what a headless run types, at fixed engine steps."""

    def __init__(self, script: dict, grammar: ActionGrammar):
        self.script = {step: UserInput(*item) if isinstance(item, tuple) else
                       UserInput(item, user_command(item, grammar)) for step, item in script.items()}

    def take(self, step: int) -> list[UserInput]:
        return [self.script[step]] if step in self.script else []

    def take_heard(self) -> list[str]:
        return []


class LiveInputs:
    """Typed lines (TypedCommands) and recognized speech (VoiceIO), as they arrive; what the user heard."""

    def __init__(self, grammar: ActionGrammar, *, typed=None, voice=None, printed=None):
        self.grammar, self.typed, self.voice, self.printed = grammar, typed, voice, printed

    def take(self, step: int) -> list[UserInput]:
        typed = self.typed.take() if self.typed is not None else []
        inputs = [UserInput(text, user_command(text, self.grammar)) for text in typed]
        if self.voice is not None:  # the recognizer names the command it heard
            inputs += [UserInput(c.text, user_command(c.command or c.text, self.grammar))
                       for c in self.voice.take_commands()]
        return inputs

    def take_heard(self) -> list[str]:
        heard = self.voice.take_heard() if self.voice is not None else []
        return heard + (self.printed.take_heard() if self.printed is not None else [])
