"""The commentary stream: short remarks decoded in the shared forward, cut into sentences, spoken or printed.

A remark decodes into a scratch block no other view reads: what was not heard is never history. A remark of an
older generation never decodes another token. Remarks are rate limited, but a user's question is answered at once:
the next remark starts as soon as the question is in view, whatever the interval.
"""

from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.view import View
from agent_runtime.session.events import Kind
from agent_runtime.thinking.phrase_grammar import FREE_TEXT

SENTENCE_ENDS = ".!?"


class CommentaryStream(Stream):
    role = "commentary"

    def __init__(self, ctx, prompt: list[int], *, context, sample, on_sentence=None,
                 interval_ms: float = 4000.0, max_tokens: int = 24, end_tokens: set[int] = frozenset(), on_remark=None,
                 text_waiting=lambda: False, grammar=FREE_TEXT):
        """context(): the blocks a new remark reads (none: no remark yet); on_sentence(text, generation);
        on_remark(view): called as each remark's first token is chosen, with the view it read (its blocks filled by
        that forward; its own block holds the prompt): a teacher's label for it (data collection); text_waiting():
        whether user text is still being prefilled (an answer waits until its question is in view); grammar: the
        PhraseGrammar each remark is decoded under (FREE_TEXT: any tokens)."""
        super().__init__(ctx)
        self.prompt, self.context, self.sample, self.on_sentence = prompt, context, sample, on_sentence
        self.on_remark, self.text_waiting = on_remark, text_waiting
        self.grammar, self.grammar_state = grammar, None
        self.question: str | None = None  # asked and not yet answered
        self.answering: str | None = None  # the question the remark under way answers
        self.interval_ms, self.max_tokens, self.end_tokens = interval_ms, max_tokens, end_tokens
        self.view: View | None = None  # the remark being decoded, and its state below
        self.pending, self.generation, self.text, self.sent_upto, self.tokens = [], 0, "", 0, 0
        self.last_start_ms = -1e18

    def stop(self, reason: str, now_ms: float | None) -> None:
        """Stop the remark being decoded; its unheard text never enters history."""
        if self.view is None:
            return
        self.emit(Kind.COMMENTARY_STOPPED, "commentary", generation=self.generation, sim_ms=now_ms,
                  reason=reason, text=self.text)
        self.view.close()
        self.view, self.pending = None, []
        self.stats.remarks_stopped += 1

    def on_interruption(self, generation: int, now_ms: float) -> None:
        self.stop("generation", now_ms)  # a remark of an older generation never decodes another token

    def ask(self, question: str) -> None:
        """The user asked: the next remark answers, as soon as the question is in view (the rate limit waived)."""
        self.question = question

    def schedule(self, plan: StepPlan) -> None:
        """Continue the remark, or start one over the context when the rate limit allows or a question waits."""
        if self.view is None:
            context = self.context()
            answer = self.question is not None and not self.text_waiting()
            if not context or not (answer or plan.now_ms - self.last_start_ms >= self.interval_ms):
                return
            self.view = View(self.store, context, name="commentary", own_label="remark")
            self.pending, self.generation, self.text, self.sent_upto, self.tokens = (
                list(self.prompt), plan.generation, "", 0, 0)
            self.answering = self.question if answer else None
            self.question = None if answer else self.question
            self.last_start_ms = plan.now_ms
            self.grammar_state = self.grammar.start()
            self.stats.remarks_started += 1
        plan.add(self, StreamInput(self.view, self.pending, logits="last"))

    def postprocess(self, logits: list, plan: StepPlan):
        """Take the sampled token; hand each finished sentence to on_sentence."""
        if self.view is None:
            return None
        token, self.grammar_state = self.grammar.choose(self.sample, logits[0], self.grammar_state)
        if self.tokens == 0 and self.on_remark is not None:
            self.on_remark(self.view)
        piece = self.tok.decode([token])
        self.tokens += 1
        ended = token in self.end_tokens or "\n" in piece or self.tokens >= self.max_tokens
        if not ended:
            self.text += piece
            self.pending = [token]
        cut = len(self.text) if ended else max(self.text.rfind(p) for p in SENTENCE_ENDS) + 1
        sentence = self.text[self.sent_upto:cut].strip()
        if sentence:
            self.sent_upto = cut
            self.emit(Kind.COMMENTARY_SENTENCE, "commentary", generation=self.generation, sim_ms=plan.now_ms,
                      text=sentence, **({"answers": self.answering} if self.answering is not None else {}))
            if self.on_sentence is not None:
                self.on_sentence(sentence, self.generation)
        if ended:
            self.view.close()
            self.view, self.pending = None, []
