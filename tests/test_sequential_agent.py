"""The sequential and no-think baselines decide from the blocks the action stream reads (system prompt, status and
frame line each prefilled on a view of itself, then the prompt), so an adapter trained on the action stream's views
plays them as it learned: their scores equal `train`'s masked forward over the same tokens and spans. Tiny random
model, real ViZDoom."""

from __future__ import annotations

import pytest
import torch

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.model.model_loader import load_model
from agent_runtime.policies.sequential_agent import SequentialAgent
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.training.command_scores import Candidates, candidate_scores
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime


class _RecordedView:
    """The decision's view: when the agent closes it (its forward committed), its tokens and isolated spans are kept."""

    def __init__(self, view, out: list):
        self._view, self._out = view, out

    def close(self):
        self._out.append((self._view.token_ids(), [list(s) for s in self._view.isolated_spans()]))
        self._view.close()

    def __getattr__(self, name):
        return getattr(self._view, name)


@pytest.mark.parametrize("think_tokens", [0, 3])
def test_a_baseline_decides_from_the_action_streams_blocks_with_the_scores_training_computes(think_tokens):
    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env)
        agent = SequentialAgent(runtime, SessionGeneration(), scenario=env.scenario, think_tokens=think_tokens)
        scored, views = [], []
        best, decide = agent.scorer.best, agent._decide

        def recording_best(prompt_logits, branch_logits):
            scored.append(agent.scorer.scores(prompt_logits, branch_logits))
            return best(prompt_logits, branch_logits)

        agent.scorer.best = recording_best
        agent._decide = lambda view, *args, **kwargs: decide(_RecordedView(view, views), *args, **kwargs)
        frame = env.new_episode(seed=3)
        for _ in range(2):
            agent.push_frame(TimedFrame(frame, read_ms=0.0))
            actions = [a for _ in range(think_tokens + 1) for a in agent.step(0.0).actions]
            assert len(actions) == 1  # one decision a cycle: read (and think), then act
            env.act({}, 4)
            frame = env.read_frame()
        agent.close()
        assert runtime.store.used_pages == 0  # every cycle's status and frame blocks were released

    assert len(scored) == len(views) == 2
    plain = load_model("tiny:llama", dtype="float32", seed=0, tokenizer=False).model  # the same weights, no runner
    tok = runtime.tokenizer
    candidates = Candidates.from_grammar(runtime.grammar, tok)
    for (tokens, spans), engine in zip(views, scored):
        assert len(spans) == 3  # system prompt, status, frame line: each attends only itself
        assert spans[0][0] == 0 and spans[1][0] == spans[0][1] and spans[2][0] == spans[1][1]
        assert len(tokens) > spans[2][1]  # then the prompt (after the thought, when it thinks)
        with torch.no_grad():
            trained = candidate_scores(plain, [tokens], candidates, pad_id=tok.pad_token_id or 0, isolated=[spans])[0]
        assert torch.allclose(trained, torch.tensor(engine), atol=1e-4)
        without = candidate_scores(plain, [tokens], candidates, pad_id=tok.pad_token_id or 0)[0]
        assert (without - trained).abs().max() > 1e-3  # the spans matter: a plain forward is another model
