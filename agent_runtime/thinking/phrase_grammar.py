"""The vocabulary as a token grammar: a remark or note decoded under it says only the vocabulary's phrases.

Every phrase the judge can check (thinking/vocabulary.py: "2 imps left", "lost demon behind right", "14 rounds",
"hp 80", "turning left", "nothing in view") is put in a trie of the tokens it encodes to after a space; a text is
phrases joined by "," and ended by a newline. At each token the model's logits outside what may follow are masked,
so the model still chooses which count, kind, side and number it says (from its view), but cannot say anything
else: no noise, every phrase a claim. What it chooses is as true as the model is: a grammar makes words checkable,
not right.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agent_runtime.thinking.vocabulary import DOING, LOST_SIDES, NOTHING, SEEN_SIDES, Claim
from envs.observation_text import SHORT_NAMES
from envs.screen_detector import CLASSES

MAX_COUNT = 9
MAX_ROUNDS = 99  # the shipped scenarios' ammo stays under it
MAX_HEALTH = 200
MAX_PHRASES = 4  # a remark or note says at most this many


def vocabulary_phrases() -> list[str]:
    """Every phrase of the vocabulary, for the kinds the shipped scenarios show."""
    names = sorted(set(SHORT_NAMES.values()) | set(CLASSES))
    claims = [Claim("seen", name=n, side=s, count=c) for n in names for s in SEEN_SIDES
              for c in range(1, MAX_COUNT + 1)]
    claims += [Claim("lost", name=n, side=s) for n in names for s in LOST_SIDES]
    claims += [Claim("doing", value=b) for b in DOING] + [Claim("ammo", value=v) for v in range(MAX_ROUNDS + 1)]
    claims += [Claim("health", value=v) for v in range(MAX_HEALTH + 1)]
    return [NOTHING] + [c.text() for c in claims]


@dataclass
class GrammarState:
    node: dict  # where in the trie the phrase under way is (the root: a phrase may start)
    phrases: int = 0  # phrases finished


class FreeText:
    """No grammar: the sampler's token, whatever it is. The streams' default, so they decode one way either way."""

    def start(self) -> None:
        return None

    def choose(self, sample, logits: torch.Tensor, state: None) -> tuple[int, None]:
        return sample(logits), None


FREE_TEXT = FreeText()


class PhraseGrammar:
    """A trie of the vocabulary's phrases in token ids; `mask` keeps the logits of the tokens that may come next."""

    END = "$"  # a trie node's key: a phrase ends here

    def __init__(self, tokenizer, phrases: list[str] | None = None, *, max_phrases: int = MAX_PHRASES):
        self.root: dict = {}
        for phrase in phrases or vocabulary_phrases():
            node = self.root
            for token in tokenizer.encode(" " + phrase, add_special_tokens=False):
                node = node.setdefault(token, {})
            node[self.END] = True
        (self.separator,) = tokenizer.encode(",", add_special_tokens=False)
        (self.newline,) = tokenizer.encode("\n", add_special_tokens=False)
        self.max_phrases = max_phrases

    def start(self) -> GrammarState:
        return GrammarState(self.root)

    def allowed(self, state: GrammarState) -> list[int]:
        """The tokens that may come next: the phrase's next tokens; after a whole phrase also "," and the end."""
        tokens = [t for t in state.node if t != self.END]
        if state.node.get(self.END):
            tokens += [self.newline] + ([self.separator] if state.phrases + 1 < self.max_phrases else [])
        return tokens

    def mask(self, logits: torch.Tensor, state: GrammarState) -> torch.Tensor:
        """`logits` [vocab] with every token that may not come next at -inf."""
        keep = torch.tensor(self.allowed(state), device=logits.device)
        masked = torch.full_like(logits, float("-inf"))
        masked[keep] = logits[keep]
        return masked

    def choose(self, sample, logits: torch.Tensor, state: GrammarState) -> tuple[int, GrammarState]:
        """`sample`'s token among those that may come next, and the state after it."""
        token = sample(self.mask(logits, state))
        return token, self.advance(state, token)

    def advance(self, state: GrammarState, token: int) -> GrammarState:
        """The state after `token` (one that allowed() gave): deeper in the phrase, or a phrase ended by "," (the
        next may start) or by the end (nothing follows in this text)."""
        if token in state.node:
            return GrammarState(state.node[token], state.phrases)
        return GrammarState(self.root, state.phrases + 1)
