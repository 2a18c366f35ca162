"""Config validation: a bad value names its key and what is allowed."""

import pytest

from agent_runtime.config import load_config
from agent_runtime.errors import UserError


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, expected", [
    ("engine:\n  decision_mode: guess\n", "bad value for 'engine.decision_mode': must be one of 'score' or 'decode'"),
    ("clock: warp\n", "bad value for 'clock': must be one of 'sync' or 'realtime'"),
    ("budgets:\n  max_frame_age_ms: 0\n", "bad value for 'budgets.max_frame_age_ms'"),
    ("budgets:\n  frames_in_vew: 3\n", "bad value for 'budgets.frames_in_vew': unknown key"),
    ("resolution: 1x1\n", "bad value for 'resolution': must be one of '160x120'"),
    ("- just\n- a list\n", "expected a mapping of keys"),
    ("scenario: [unclosed\n", "not valid YAML"),
])
def test_bad_values_are_named(tmp_path, text, expected):
    with pytest.raises(UserError) as err:
        load_config(write(tmp_path, text))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_defaults_overrides_and_missing_file(tmp_path):
    config = load_config(scenario="basic", seed=None)
    assert config.scenario == "basic" and config.engine.decision_mode == "score" and config.seed == 0
    with pytest.raises(UserError, match="config file not found"):
        load_config(tmp_path / "none.yaml")
