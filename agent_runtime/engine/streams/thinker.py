"""The Thinker: free-running thought, one token a step in the shared forward, in paragraphs.

Each finished paragraph, sealed, joins the thoughts section every view reads; the newest few stay in view. A teacher
(on_paragraph, data collection) may write a paragraph's tokens instead of the model, one a step as the model would.
"""

from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.prompts import thought_text
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.view import View
from agent_runtime.session.events import Kind
from agent_runtime.thinking.phrase_grammar import FREE_TEXT
from agent_runtime.thinking.vocabulary import join, parse_claims


class ThinkerStream(Stream):
    role = "thinker"

    def __init__(self, ctx, prompt: list[int], *, paragraph_tokens: int, end_tokens, sample, while_deciding=True,
                 on_paragraph=None, frames=None, grammar=FREE_TEXT):
        """while_deciding=False: no token in a step where the action stream decides (its cost is the reaction),
        unless the Thinker sat out the step before too (decisions on every step must not starve it).
        on_paragraph(view): called as each paragraph's first token is chosen, with the view it read (its blocks filled
        by that forward; its own block holds the prompt); the tokens it returns (ending in a newline) are the
        paragraph's, written instead of sampled; None: the model writes it. frames: the frame stream, whose newest
        frame in view stamps each paragraph's events with its tic. grammar: the PhraseGrammar the model's paragraphs
        are decoded under (FREE_TEXT: any tokens)."""
        super().__init__(ctx)
        self.while_deciding, self.sat_out = while_deciding, False
        self.prompt, self.paragraph_budget, self.end_tokens, self.sample = prompt, paragraph_tokens, end_tokens, sample
        self.view = View(self.store, name="thinker", own_label="thought")
        self.on_paragraph, self.forced, self.frames = on_paragraph, None, frames
        self.pending = list(prompt)
        self.paragraph_tokens = 0
        self.grammar, self.grammar_state = grammar, grammar.start()

    def schedule(self, plan: StepPlan) -> None:
        if plan.deciding and not self.while_deciding and not self.sat_out:
            self.sat_out = True
            return
        self.sat_out = False
        plan.add(self, StreamInput(self.view, self.pending, logits="last"))

    def postprocess(self, logits: list, plan: StepPlan):
        self.stats.thinker_tokens += 1
        if self.paragraph_tokens == 0 and self.on_paragraph is not None:  # the prompt's forward filled the view
            self.forced = self.on_paragraph(self.view)
        if self.forced:
            token = self.forced.pop(0)
        else:
            token, self.grammar_state = self.grammar.choose(self.sample, logits[0], self.grammar_state)
        self.paragraph_tokens += 1
        text = self.tok.decode([token])
        if not (token in self.end_tokens or "\n" in text or self.paragraph_tokens >= self.paragraph_budget):
            self.pending = [token]
            self.emit(Kind.TOKEN, "thinker", sim_ms=plan.now_ms, token=token, text=text)
            return
        block = self.view.roll_own("thought")  # the paragraph ends: sealed, it joins the thoughts section
        block.sealed = True
        self.sections.add("thoughts", block)
        self.stats.thinker_paragraphs += 1
        text = self.tok.decode(block.token_ids)
        claims, noise = parse_claims(thought_text(text))
        self.stats.note_in_view = bool(claims)
        self.stats.notes += self.stats.note_in_view
        newest = self.frames.newest_in_view() if self.frames is not None else None
        tic = newest.frame.tic if newest is not None else None
        self.emit(Kind.THINKER_PARAGRAPH, "thinker", tic=tic, sim_ms=plan.now_ms, text=text)
        if claims:  # a note: what it claims, in the vocabulary's own words (bench words judges them)
            self.emit(Kind.THINKER_NOTE, "thinker", tic=tic, sim_ms=plan.now_ms, text=join(claims),
                      claims=[c.text() for c in claims], noise=noise)
        self.pending, self.forced = list(self.prompt), None
        self.paragraph_tokens = 0
        self.grammar_state = self.grammar.start()
