"""LaggedEnv: a player sees the game exactly `lag_tics` tics late, stamped as now; lag 0 changes nothing."""

import numpy as np
import pytest

from envs.doom_env import DoomEnv
from envs.lagged_env import LaggedEnv


@pytest.mark.parametrize("lag", [0, 3])
def test_frames_show_the_game_lag_tics_ago_stamped_with_the_current_tic(lag):
    with DoomEnv("defend_the_center", seed=3) as raw, DoomEnv("defend_the_center", seed=3) as twin:
        lagged = LaggedEnv(raw, lag)
        lagged.new_episode()
        history = [twin.new_episode()]  # the same game, unlagged, one frame a tic
        for step in range(12):
            buttons = {"TURN_LEFT": 1} if step % 3 else {"ATTACK": 1}
            lagged.act(buttons, 2)
            for _ in range(2):
                twin.act(buttons, 1)
                history.append(twin.read_frame())
            seen = lagged.read_frame()
            assert seen.tic == history[-1].tic  # stamped as now
            shown = history[max(0, len(history) - 1 - lag)]  # what the screen showed lag tics ago
            assert np.array_equal(seen.screen, shown.screen) and seen.variables == shown.variables
        if lag:
            assert not np.array_equal(seen.screen, history[-1].screen)  # the view turned: late is different


def test_a_negative_lag_is_refused():
    with pytest.raises(ValueError, match="lag_tics"):
        LaggedEnv(object(), -1)
