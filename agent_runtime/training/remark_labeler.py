"""The commentary's teacher in collection: the describer's remark for each remark's view.

At each remark's start the describer (thinking/describer.py) reads the remark's view from its own blocks, decoded:
the newest frame line and the status line, the text the model reads, so the remark is learnable from the view. The
command under way is left out: the remark's view holds no action log (that sits in the action stream's own block).
The view's tokens and the remark go to the data set (remarks.jsonl); the model's own remark is still what plays.
"""

from agent_runtime.engine.prompts import COMMENTARY_PROMPT, encode
from agent_runtime.thinking.describer import describe
from agent_runtime.training.decision_log import RemarkExample
from agent_runtime.training.note_labeler import read_view, view_texts


class RemarkLabeler:
    """CommentaryStream's on_remark for one episode at a time; examples go to `log` (anything with add())."""

    def __init__(self, tokenizer, log):
        self.tok, self.log = tokenizer, log
        self.prompt = encode(tokenizer, COMMENTARY_PROMPT)
        self.start_episode(0)

    def start_episode(self, episode: int) -> None:
        self.episode, self.remarks = episode, 0

    def on_remark(self, view) -> None:
        lines, status, _ = view_texts(view, self.tok)
        if not lines:  # no frame in view: nothing to describe
            return
        remark = describe(lines[-1], status, None)
        read, tic = read_view(view)
        self.log.add(RemarkExample(self.episode, tic, read, self.prompt, encode(self.tok, f" {remark}\n"), remark,
                                   view.isolated_spans()))
        self.remarks += 1
