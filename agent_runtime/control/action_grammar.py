"""Constrained decoding of controller commands: only valid commands for the scenario's buttons can come out.

The model reads and writes a plain word per button, alone or with a hold count joined to it (" left3\n": TURN_LEFT
for 3 tics; "spaced", as older runs wrote it: " left 3\n"); the words are one token each where the tokenizer allows,
so the prompt's last logits score the words and one row per word the hold counts (a space before the count would be a
token, and a row, of its own). Events, recordings and typed commands keep the button names.
"""

from dataclasses import dataclass, field

from agent_runtime.errors import UserError
from agent_runtime.engine.prompts import encode
from agent_runtime.control.turning import MAX_HOLD_TICS

NOOP = "NOOP"
COUNT_TEXTS = ("joined", "spaced")
# The word the model uses for each button, in order of preference; an earlier button wins a shared word
# (TURN_LEFT takes "left" where a scenario also has MOVE_LEFT, which then says "step left").
COMMAND_WORDS = {
    "ATTACK": ("fire",),
    "TURN_LEFT": ("left", "turn left"),
    "TURN_RIGHT": ("right", "turn right"),
    "MOVE_LEFT": ("left", "step left"),
    "MOVE_RIGHT": ("right", "step right"),
    "MOVE_FORWARD": ("forward",),
    "MOVE_BACKWARD": ("back",),
    "USE": ("use",),
    "JUMP": ("jump",),
    "SPEED": ("run",),
    NOOP: ("wait",),
}


def command_words(buttons) -> dict[str, str]:
    """{button or NOOP: the word the model reads and writes for it}, each word distinct."""
    order = list(COMMAND_WORDS)
    words: dict[str, str] = {}
    names = list(buttons) + [NOOP]
    for name in sorted(names, key=lambda n: order.index(n) if n in order else len(order)):
        choices = COMMAND_WORDS.get(name, ()) + (name.lower().replace("_", " "),)
        words[name] = next(w for w in choices if w not in words.values())
    return {name: words[name] for name in names}


@dataclass(frozen=True)
class Command:
    """A parsed command: which buttons to press and for how many tics (`word`: how the model says it)."""

    name: str
    buttons: dict
    tics: int
    word: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        return self.name if self.tics == 0 else f"{self.name} {self.tics}"


def parse_command_text(text: str) -> tuple[str, int]:
    """(button name or NOOP, tics) of a Command.text, as events carry it ("TURN_LEFT 4"; a bare name: 0 tics)."""
    name, _, tics = text.partition(" ")
    return name, int(tics or 0)


@dataclass
class _Node:
    children: dict[int, "_Node"] = field(default_factory=dict)
    command: Command | None = None  # set on leaves


def check_expressible(buttons, scenario: str) -> None:
    """Binary buttons only: delta buttons (…_DELTA) take a continuous value the grammar does not speak."""
    bad = [b for b in buttons if b.endswith("_DELTA")]
    if bad:
        raise UserError(f"{scenario} has button(s) {', '.join(bad)} that the action grammar cannot express (only "
                        "binary buttons such as ATTACK, TURN_LEFT, MOVE_FORWARD); pick a scenario without delta "
                        "buttons")


class ActionGrammar:
    def __init__(self, buttons: tuple[str, ...], tokenizer, *, default_tics: int = 4, hold_counts: bool = False,
                 scenario: str = "scenario", count_text: str = "joined"):
        """hold_counts: score mode chooses among every command at every hold 1..MAX_HOLD_TICS ("left3"), not
        the words alone at default_tics. count_text: "joined" ("left3") or "spaced" ("left 3")."""
        if count_text not in COUNT_TEXTS:
            raise ValueError(f"count_text must be one of {COUNT_TEXTS}, not {count_text!r}")
        check_expressible(buttons, scenario)
        if not buttons:
            raise UserError(f"{scenario} has no buttons for the action stream to press")
        self.buttons = tuple(buttons)
        self.default_tics, self.hold_counts = default_tics, hold_counts
        self.count_sep = "" if count_text == "joined" else " "
        self.words = command_words(self.buttons)
        self.root = _Node()
        self.commands: list[Command] = []
        for command, text in self._spoken([None] + [n for n in range(1, MAX_HOLD_TICS + 1) if n != default_tics]):
            self._add(tokenizer, command, f"{text}\n")

    def _spoken(self, holds):
        """(command, text) for every word at every hold in `holds` (None: the word alone, at default_tics)."""
        for name, word in self.words.items():
            pressed = {} if name == NOOP else {name: 1.0}
            for n in holds:
                text = word if n is None else self.say(word, n)
                yield Command(name, pressed, n or self.default_tics, word), f" {text}"

    def _add(self, tokenizer, command: Command, text: str) -> None:
        ids = encode(tokenizer, text)
        node = self.root
        for t in ids:
            if node.command is not None:
                raise ValueError(f"command {text!r} extends another command's tokens")
            node = node.children.setdefault(t, _Node())
        if node.children or node.command is not None:
            raise ValueError(f"command {text!r} is a prefix of another command's tokens")
        node.command = command
        self.commands.append(command)

    def candidates(self, tokenizer) -> list[tuple[Command, list[int]]]:
        """What score mode compares, with its tokens: every command at every hold ("left 3") with hold_counts,
        else every command at its default hold (the word alone)."""
        holds = range(1, MAX_HOLD_TICS + 1) if self.hold_counts else (None,)
        return [(command, encode(tokenizer, text)) for command, text in self._spoken(holds)]

    def say(self, word: str, tics: int) -> str:
        """A word with its hold count as the model reads and writes it ("left3", or "left 3" spaced)."""
        return f"{word}{self.count_sep}{tics}"

    def describe(self) -> str:
        """The commands as the system prompt lists them: "fire (ATTACK), left (TURN_LEFT), ... wait (NOOP)"."""
        return ", ".join(f"{word} ({name})" for name, word in self.words.items())


def _log_softmax(logits):
    import torch

    return torch.log_softmax(logits.float().reshape(-1, logits.shape[-1]), -1)


class CommandScorer:
    """Decides a command in ONE forward: the action prompt plus one branch per distinct command prefix.

    Each branch reads the same view as the prompt and sits right after it; because every stream's new KV
    is written before attention, a branch sees the prompt of the same forward, so its rows give exactly
    the logits that feeding the command token by token would give. TURN_LEFT and TURN_RIGHT share one
    branch (' T','URN','_'): the last row scores LEFT against RIGHT.
    """

    def __init__(self, grammar: ActionGrammar, tokenizer):
        self.candidates = grammar.candidates(tokenizer)
        self.say = grammar.say
        self.tok = tokenizer
        prefixes = dict.fromkeys(tuple(tokens[:-1]) for _, tokens in self.candidates if len(tokens) > 1)
        self.branch_index = {prefix: i for i, prefix in enumerate(prefixes)}
        self.branches = [list(p) for p in prefixes]

    def branch_inputs(self, view) -> list:
        """One StreamInput per branch, each on a scratch view that reads `view` (prompt included) and then its own
        block (its rows give p(token k+1 | prompt, tokens ..k)); close the views after the forward."""
        from agent_runtime.engine.model_runner import StreamInput
        from agent_runtime.engine.view import View

        return [StreamInput(View(view.store, view.ordered(), name=f"branch{i}", own_label="branch"), tokens,
                            logits="all") for i, tokens in enumerate(self.branches)]

    def scores(self, prompt_logits, branch_logits: list) -> list[float]:
        """Each candidate's summed log-probability, in `candidates` order (what training imitates)."""
        import torch

        first = _log_softmax(prompt_logits)  # once per decision, not once per candidate
        rows = [_log_softmax(b) for b in branch_logits]
        scores = []
        for _, tokens in self.candidates:
            total = float(first[0, tokens[0]])
            if len(tokens) > 1:
                branch = rows[self.branch_index[tuple(tokens[:-1])]]
                total += float(branch[torch.arange(len(tokens) - 1), torch.tensor(tokens[1:])].sum())
            scores.append(total)
        return scores

    def tokens_for(self, command: Command) -> list[int]:
        """The tokens the action log gets for `command` (a candidate's, or the word with its count)."""
        tokens = next((tokens for candidate, tokens in self.candidates if candidate == command), None)
        return list(tokens) if tokens is not None else encode(self.tok, f" {self.say(command.word, command.tics)}")

    def best(self, prompt_logits, branch_logits: list) -> tuple[Command, list[int]]:
        """The most likely command given the prompt's last logits and each branch's rows."""
        scores = self.scores(prompt_logits, branch_logits)
        command, tokens = self.candidates[max(range(len(scores)), key=scores.__getitem__)]
        return command, list(tokens)


class CommandDecoder:
    """Walks the trie for one decision: choose(logits) picks the best allowed token, then follows forced runs, until
    node.command (a leaf's) is the command decided."""

    def __init__(self, grammar: ActionGrammar):
        self.node = grammar.root

    def choose(self, logits) -> list[int]:
        """Pick the best allowed next token (greedy); return the tokens appended (choice + forced run)."""
        allowed = list(self.node.children)
        best = allowed[0] if len(allowed) == 1 else allowed[int(logits[allowed].argmax())]
        self.node = self.node.children[best]
        return [best] + self.forced_prefix()

    def forced_prefix(self) -> list[int]:
        """Tokens forced before the next real choice (e.g. 'URN' '_' once ' T' is chosen)."""
        appended = []
        while len(self.node.children) == 1 and self.node.command is None:
            (forced,) = self.node.children
            appended.append(forced)
            self.node = self.node.children[forced]
        return appended
