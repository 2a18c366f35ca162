"""Remarks and notes decoded under the vocabulary's token grammar say only checkable phrases: every phrase a claim the
judge parses, none noise, whatever the logits; the model still chooses which. Tiny random model, real ViZDoom."""

from __future__ import annotations

import pytest
import torch

from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.thinking.phrase_grammar import MAX_PHRASES, PhraseGrammar, vocabulary_phrases
from agent_runtime.thinking.vocabulary import parse_claims, parse_phrase
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime, tiny_loaded


@pytest.fixture(scope="module")
def grammar():
    return PhraseGrammar(tiny_loaded().tokenizer)


def _decode(grammar, choose, limit: int = 64) -> list[int]:
    state, out = grammar.start(), []
    for _ in range(limit):
        token = choose(state)
        out.append(token)
        state = grammar.advance(state, token)
        if token == grammar.newline:
            break
    return out


def test_every_phrase_is_a_claim_and_is_spelled_by_the_grammar(grammar):
    phrases = vocabulary_phrases()
    assert len(phrases) > 800 and all(parse_phrase(p) is not None for p in phrases)
    tok = tiny_loaded().tokenizer
    for phrase in ("2 imps left", "lost demon behind right", "14 rounds", "hp 80", "nothing in view", "firing"):
        tokens = tok.encode(f" {phrase}", add_special_tokens=False) + [grammar.newline]
        state = grammar.start()
        for token in tokens:
            assert token in grammar.allowed(state), (phrase, tok.decode([token]))
            state = grammar.advance(state, token)
    assert tok.encode(" 2 imp lefty", add_special_tokens=False)[-1] not in grammar.allowed(state)


def test_whatever_the_logits_a_decoded_text_is_phrases_that_all_claim(grammar):
    tok = tiny_loaded().tokenizer
    generator = torch.Generator().manual_seed(0)
    texts = []
    for _ in range(30):
        def choose(state):
            return int(torch.argmax(grammar.mask(torch.randn(len(tok), generator=generator), state)))
        texts.append(tok.decode(_decode(grammar, choose)))
    for text in texts:
        claims, noise = parse_claims(text)
        assert text.endswith("\n") and noise == 0 and 1 <= len(claims) <= MAX_PHRASES, text
    assert len(set(texts)) > 20  # the logits chose (short ones repeat: "waiting")


def test_the_logits_choose_among_the_phrases(grammar):
    tok = tiny_loaded().tokenizer
    wanted = tok.encode(" 3 demons right, 7 rounds\n", add_special_tokens=False)

    def choose(state):  # logits that favour the wanted text's next token, wherever the grammar allows it
        logits = torch.zeros(len(tok))
        logits[wanted[len(chosen)]] = 5.0
        token = int(torch.argmax(grammar.mask(logits, state)))
        chosen.append(token)
        return token

    chosen: list[int] = []
    assert tok.decode(_decode(grammar, choose)) == " 3 demons right, 7 rounds\n"


def test_an_episode_with_the_vocabulary_writes_notes_and_remarks_without_noise():
    bus = EventBus()
    with DoomEnv("defend_the_center", seed=0) as env:
        runtime = make_runtime(env, engine={"vocabulary": "both", "commentary_interval_ms": 500.0})
        result = run_llm_episode(env, runtime, max_tics=200, fixed_cost=FixedCost(), bus=bus, commentary=True)
    paragraphs = [e.payload["text"] for e in bus.of_kind("thinker_paragraph")]
    notes = bus.of_kind("thinker_note")
    remarks = [e.payload["text"] for e in bus.of_kind("commentary_sentence")]
    assert len(paragraphs) >= 2 and len(notes) == len(paragraphs) == result["notes"]
    assert all(e.payload["noise"] == 0 for e in notes)
    assert remarks and all(parse_claims(r)[1] == 0 and parse_claims(r)[0] for r in remarks), remarks
