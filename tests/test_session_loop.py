"""The one session loop: headless and live sessions treat the same user inputs the same way."""

from __future__ import annotations

import io

from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.live_session import TypedCommands, run_live
from agent_runtime.session.llm_episode import run_llm_episode
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime

INPUTS = ("TURN_LEFT", "what do you see", "turn right")


def _user_events(bus: EventBus) -> list[tuple]:
    """(kind, generation, text, command) of the user's inputs and the interruptions they caused, in order."""
    return [(e.kind, e.generation, e.payload.get("text"), e.payload.get("command")) for e in bus.events
            if e.kind in ("user_input", "generation_bump")]


def test_headless_and_live_recordings_stamp_the_same_generations_for_the_same_inputs():
    headless, live = EventBus(), EventBus()
    with DoomEnv("defend_the_center", seed=0) as env:
        runtime = make_runtime(env)
        run_llm_episode(env, runtime, max_tics=60, fixed_cost=FixedCost(), bus=headless,
                        user_script={3 + 3 * i: text for i, text in enumerate(INPUTS)})
    typed = TypedCommands(io.StringIO("".join(text + "\n" for text in INPUTS)))
    with DoomEnv("defend_the_center", clock="realtime", seed=0) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        result = run_live(env, runtime, seconds=1.5, typed=typed, bus=live, print_commentary=None)
    expected = [("user_input", 0, "TURN_LEFT", "TURN_LEFT 4"), ("generation_bump", 1, "TURN_LEFT", None),
                ("user_input", 1, "what do you see", None), ("generation_bump", 2, "what do you see", None),
                ("user_input", 2, "turn right", "TURN_RIGHT 4"), ("generation_bump", 3, "turn right", None)]
    assert _user_events(headless) == expected
    assert _user_events(live) == expected
    assert result["user_actions"] == 2  # both commands acted at once; the question only went to the agent


def test_live_play_without_voice_prints_remarks_and_they_enter_history_as_heard():
    lines: list[str] = []
    bus = EventBus()
    with DoomEnv("defend_the_center", clock="realtime", seed=0) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        result = run_live(env, runtime, seconds=3.0, bus=bus, print_commentary=lines.append)
    sentences = [e.payload["text"] for e in bus.of_kind("commentary_sentence")]
    assert result["remarks_started"] >= 1 and sentences
    assert lines == [f"agent: {s}" for s in sentences]  # every remark printed, as it was said
    heard = [e.payload["text"] for e in bus.of_kind("commentary_heard")]
    assert heard and heard == sentences[: len(heard)]  # what was printed, and only that, became history
