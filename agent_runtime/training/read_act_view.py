"""A collected decision as the read-act agent (`no_think`) would read it: what that agent's own adapter learns from.

The no_think agent (policies/sequential_agent.py, no thought tokens) reads the system prompt, a status block and
the newest frame line, each prefilled on a view of itself, then the action prompt. The multi-stream action view
holds those very blocks and, besides them, the newest thought, remark and user text and the commands of its own
block. Cutting the others out of each decision (`train --views read-act`) trains an adapter the same way, on the
same episodes, on views without thoughts: a `no_think` baseline that plays on the views it learned from, where the
multi-stream agent's adapter plays on views it never saw (docs/thinking.md measures both).
"""

from agent_runtime.errors import UserError

VIEWS = ("agent", "read-act")  # train --views: what the multi-stream action view read, or the read-act cut of it


def read_act_view(tokens: list[int], isolated: list[list[int]] | None, blocks: list[list] | None,
                  prompt_length: int) -> tuple[list[int], list[list[int]] | None]:
    """(tokens, isolated spans) of the read-act view: the system block, the newest status and frame blocks, and the
    last `prompt_length` tokens of the view's own block (the action prompt); isolated blocks stay isolated."""
    if not blocks:
        raise UserError("this data set stores no block layout per decision (collected before it was kept); "
                        "collect it again to train with --views read-act")
    if sum(length for _, length in blocks) != len(tokens):
        raise UserError(f"a decision's block layout covers {sum(length for _, length in blocks)} tokens, not its "
                        f"{len(tokens)}: the data set is damaged; collect it again")
    starts = [sum(length for _, length in blocks[:i]) for i in range(len(blocks))]
    newest = {kind: max((i for i, (label, _) in enumerate(blocks) if label.startswith(kind)), default=None)
              for kind in ("status", "frame")}
    kept = [(starts[i], starts[i] + blocks[i][1]) for i, (label, _) in enumerate(blocks)
            if label == "system" or i in newest.values()]
    end = len(tokens)
    kept.append((end - prompt_length, end))
    whole = {tuple(span) for span in isolated or []}
    out_tokens, out_isolated = [], []
    for start, stop in kept:
        if (start, stop) in whole:
            out_isolated.append([len(out_tokens), len(out_tokens) + stop - start])
        out_tokens += tokens[start:stop]
    return out_tokens, (out_isolated if isolated is not None else None)
