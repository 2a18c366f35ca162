"""What the user says to the agent, one path for typed and spoken words: text, and the command it spells.

A text that spells a command ("TURN_LEFT", "ATTACK 3", "turn left") acts directly; any other text is only read
by the agent. Sources: a script by engine step (headless, replays), typed lines and recognized speech (live).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_runtime.control.action_grammar import NOOP, ActionGrammar, Command
from agent_runtime.recording.user_script import command_for_text
from agent_runtime.voice.voice_commands import COMMANDS, command_for, command_to_buttons


@dataclass(frozen=True)
class UserInput:
    text: str
    command: Command | None  # acts at once on the newest frame; None: words for the agent to read


def user_command(text: str | None, grammar: ActionGrammar) -> Command | None:
    """The command a typed or spoken text spells, or None when it is words for the agent."""
    command = command_for_text(grammar, text)
    if command is not None or not text:
        return command
    name, tics = _spoken(text, grammar.default_tics)
    if name == "STOP":  # release everything: hold no button
        return command_for_text(grammar, f"{NOOP} {tics}")
    pressed = command_to_buttons(name, grammar.buttons) if name else None
    return None if pressed is None else Command(name, pressed, tics)


def _spoken(text: str, default_tics: int) -> tuple[str | None, int]:
    """("TURN_LEFT", tics) for a phrase ("turn left") or a voice command's text ("TURN_LEFT 4"); (None, ...) else."""
    name = command_for(text)
    if name is not None:
        return name, default_tics
    words = text.strip().upper().split()
    if words and words[0] in COMMANDS and (len(words) == 1 or (len(words) == 2 and words[1].isdigit())):
        return words[0], int(words[1]) if len(words) == 2 else default_tics
    return None, default_tics


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

