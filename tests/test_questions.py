"""A user's question is answered at once: the commentary's next remark starts as soon as the question is in view,
whatever the rate limit, and its sentences say which question they answer; other words wait for the interval."""

from __future__ import annotations

import pytest

from agent_runtime.control.user_inputs import is_question, user_command
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.llm_episode import run_llm_episode
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime

ASKED_AT_STEP = 40


@pytest.mark.parametrize("text, question", [("what do you see", True), ("how much ammo", True), ("left or right?", True),
                                            ("nice shot", False), ("turn left", False), ("", False)])
def test_which_texts_are_questions(text, question):
    assert is_question(text) is question


def test_the_spoken_questions_are_questions_that_press_no_button():
    from agent_runtime.voice.voice_commands import PHRASES, command_for

    spoken = sorted(p for p, c in PHRASES.items() if c == "DESCRIBE")
    assert spoken == ["how much ammo", "what do you see"]
    assert all(is_question(p) and command_for(p) == "DESCRIBE" for p in spoken)
    with DoomEnv("defend_the_center", seed=0) as env:
        grammar = make_runtime(env).grammar
    assert all(user_command(p, grammar) is None for p in spoken)  # words for the agent: no button


def _play(text: str) -> tuple[EventBus, dict]:
    bus = EventBus()
    with DoomEnv("defend_the_center", seed=0) as env:
        runtime = make_runtime(env, engine={"commentary_interval_ms": 60000.0, "commentary_max_tokens": 8})
        result = run_llm_episode(env, runtime, max_tics=160, fixed_cost=FixedCost(), bus=bus, commentary=True,
                                 user_script={ASKED_AT_STEP: text})
    return bus, result


def test_a_question_is_answered_at_once_and_other_words_wait_for_the_interval():
    bus, result = _play("what do you see")
    asked = bus.of_kind("user_input")[0]
    answers = [e for e in bus.of_kind("commentary_sentence") if e.payload.get("answers") == "what do you see"]
    assert answers and result["remarks_started"] == 2  # the first remark, then the answer (the interval is 60 s)
    assert 0 < answers[0].sim_ms - asked.sim_ms < 2000, (asked.sim_ms, answers[0].sim_ms)
    others = [e for e in bus.of_kind("commentary_sentence") if e not in answers]
    assert others and all(e.sim_ms < asked.sim_ms for e in others)  # only the first remark came before

    bus, result = _play("nice shot")
    assert result["remarks_started"] == 1 and not any("answers" in e.payload for e in bus.of_kind("commentary_sentence"))
