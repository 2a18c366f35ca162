"""Constrained decoding of controller commands: only valid commands for the scenario's buttons can come out.

A command is `<BUTTON>` or `<BUTTON> <tics>` followed by a newline, e.g. " TURN_LEFT 3\n". All command
strings are tokenized once into a token trie; at each decode step only the children of the current trie
node are allowed, and runs of forced tokens (a single child) are appended without asking the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_runtime.errors import UserError

NOOP = "NOOP"


@dataclass(frozen=True)
class Command:
    """A parsed command: which buttons to press and for how many tics."""

    name: str
    buttons: dict
    tics: int

    @property
    def text(self) -> str:
        return self.name if self.tics == 0 else f"{self.name} {self.tics}"


@dataclass
class _Node:
    children: dict[int, "_Node"] = field(default_factory=dict)
    command: Command | None = None  # set on leaves


def expressible(button: str) -> bool:
    """Binary buttons only: delta buttons (…_DELTA) take a continuous value the grammar does not speak."""
    return not button.endswith("_DELTA")


class ActionGrammar:
    def __init__(self, buttons: tuple[str, ...], tokenizer, *, max_hold_tics: int = 8, default_tics: int = 4,
                 scenario: str = "scenario"):
        bad = [b for b in buttons if not expressible(b)]
        if bad:
            raise UserError(
                f"{scenario} has button(s) {', '.join(bad)} that the action grammar cannot express "
                "(only binary buttons such as ATTACK, TURN_LEFT, MOVE_FORWARD); pick a scenario without delta buttons"
            )
        if not buttons:
            raise UserError(f"{scenario} has no buttons for the action stream to press")
        self.buttons = tuple(buttons)
        self.default_tics = default_tics
        self.root = _Node()
        self.commands: list[Command] = []
        names = list(self.buttons) + [NOOP]
        for name in names:
            pressed = {} if name == NOOP else {name: 1.0}
            self._add(tokenizer, Command(name, pressed, default_tics), f" {name}\n")
            for n in range(2, max_hold_tics + 1):
                if n != default_tics:
                    self._add(tokenizer, Command(name, pressed, n), f" {name} {n}\n")

    def _add(self, tokenizer, command: Command, text: str) -> None:
        ids = tokenizer.encode(text, add_special_tokens=False)
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
        """Every command at its default hold, with its tokens (for one-forward sequence scoring)."""
        out = []
        for name in list(self.buttons) + [NOOP]:
            pressed = {} if name == NOOP else {name: 1.0}
            out.append((Command(name, pressed, self.default_tics), tokenizer.encode(f" {name}", add_special_tokens=False)))
        return out

    def start(self) -> "CommandDecoder":
        return CommandDecoder(self)


def sequence_logprob(first_logits, branch_logits, tokens: list[int]) -> float:
    """log p(tokens | prompt): first token from the prompt's last logits, the rest from the branch rows."""
    rows = _log_softmax(branch_logits) if len(tokens) > 1 else None
    return _summed_logprob(_log_softmax(first_logits), rows, tokens)


def _log_softmax(logits):
    import torch

    return torch.log_softmax(logits.float().reshape(-1, logits.shape[-1]), -1)


def _summed_logprob(first_logprobs, row_logprobs, tokens: list[int]) -> float:
    import torch

    total = float(first_logprobs[0, tokens[0]])
    if len(tokens) > 1:
        total += float(row_logprobs[torch.arange(len(tokens) - 1), torch.tensor(tokens[1:])].sum())
    return total


class CommandScorer:
    """Decides a command in ONE forward: the action prompt plus one branch per distinct command prefix.

    Each branch reads the same view as the prompt and sits right after it; because every stream's new KV
    is written before attention, a branch sees the prompt of the same forward, so its rows give exactly
    the logits that feeding the command token by token would give. TURN_LEFT and TURN_RIGHT share one
    branch (' T','URN','_'): the last row scores LEFT against RIGHT.
    """

    def __init__(self, grammar: ActionGrammar, tokenizer):
        self.candidates = grammar.candidates(tokenizer)
        prefixes: dict[tuple[int, ...], int] = {}
        for _, tokens in self.candidates:
            if len(tokens) > 1:
                prefixes.setdefault(tuple(tokens[:-1]), len(prefixes))
        self.branch_index = prefixes
        self.branches = [list(p) for p in prefixes]

    def branch_inputs(self, view) -> list:
        """One StreamInput per branch, each on a scratch view that reads `view` (prompt included) and then
        its own block; close the views after the forward."""
        from agent_runtime.model_runner import StreamInput
        from agent_runtime.view import View

        inputs = []
        for i, tokens in enumerate(self.branches):  # rows give p(token k+1 | prompt, tokens ..k)
            branch = View(view.store, view.ordered(), name=f"branch{i}")
            branch.start_own("branch")
            inputs.append(StreamInput(branch, tokens, logits="all"))
        return inputs

    def best(self, prompt_logits, branch_logits: list) -> tuple[Command, list[int]]:
        """The most likely command given the prompt's last logits and each branch's rows."""
        first = _log_softmax(prompt_logits)  # once per decision, not once per candidate
        rows = [_log_softmax(b) for b in branch_logits]
        scores = []
        for _, tokens in self.candidates:
            branch = rows[self.branch_index[tuple(tokens[:-1])]] if len(tokens) > 1 else None
            scores.append(_summed_logprob(first, branch, tokens))
        best = max(range(len(scores)), key=scores.__getitem__)
        command, tokens = self.candidates[best]
        return command, list(tokens)


class CommandDecoder:
    """Walks the trie for one decision. feed(logits) picks the best allowed token, then follows forced runs."""

    def __init__(self, grammar: ActionGrammar):
        self.node = grammar.root

    @property
    def allowed(self) -> list[int]:
        return list(self.node.children)

    @property
    def done(self) -> Command | None:
        return self.node.command

    def choose(self, logits) -> list[int]:
        """Pick the best allowed next token (greedy); return the tokens appended (choice + forced run)."""
        allowed = self.allowed
        if len(allowed) == 1:
            best = allowed[0]
        else:
            scores = logits[allowed]
            best = allowed[int(scores.argmax())]
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
