"""A ViZDoom game with a small, explicit API: read a time-stamped Frame, press named buttons for N tics.

Two clocks:
- "sync" (Mode.PLAYER): the world only moves when told to; `act`/`advance` move it exactly N tics.
- "realtime" (Mode.ASYNC_PLAYER): the world runs at 35 tics/s of wall-clock time, also while
  the caller thinks. `act` holds buttons ~N tics, then releases them explicitly (the engine would
  otherwise keep them held).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import vizdoom as vzd

from envs import engine_watchdog
from envs.engine_guard import (  # noqa: F401 (EngineHung: re-exported)
    EngineDied,
    EngineGuard,
    EngineHung,
    python_signal_handlers,
)
from envs.frame import Frame, ObjectLabel
from envs.scenarios import resolve_scenario

CLOCKS = ("sync", "realtime")
# The engine writes its own ini file; keep it out of the caller's working directory.
ENGINE_INI = Path(tempfile.gettempdir()) / "doom-agent-runtime" / "_vizdoom.ini"
TICS_PER_SECOND = 35

INIT_S = 15.0  # an engine start may take this long (a loaded machine) before it counts as hung
EPISODE_S = 1.0  # a new episode likewise (it takes ~10-30 ms)
CLOSE_S = 2.0  # a close that takes longer: the engine is killed
SYNC_TIC_S = 0.005  # a generous bound for one sync tic (~0.3 ms at 160x120), for make_action(tics=N)

# Always in Frame.variables, whatever the scenario config lists.
FRAME_VARIABLES = ("HEALTH", "AMMO2", "SELECTED_WEAPON_AMMO", "KILLCOUNT", "POSITION_X", "POSITION_Y", "ANGLE")


def _resolution(text: str) -> vzd.ScreenResolution:
    name = "RES_" + text.strip().upper()
    value = getattr(vzd.ScreenResolution, name, None)
    if value is None:
        allowed = sorted(n[4:] for n in dir(vzd.ScreenResolution) if n.startswith("RES_"))
        raise ValueError(f"unknown resolution '{text}'; use WIDTHxHEIGHT, one of: {', '.join(a.lower() for a in allowed)}")
    return value


def _label(obj: vzd.Label) -> ObjectLabel:
    return ObjectLabel(
        object_id=int(obj.object_id),
        name=obj.object_name,
        category=obj.object_category,
        box=(int(obj.x), int(obj.y), int(obj.width), int(obj.height)),
        x=float(obj.object_position_x),
        y=float(obj.object_position_y),
    )


def _world_object(obj: vzd.Object) -> ObjectLabel:
    return ObjectLabel(
        object_id=int(obj.id), name=obj.name, category=obj.category, box=None,
        x=float(obj.position_x), y=float(obj.position_y),
    )


def _init_watched(game: vzd.DoomGame, guard: EngineGuard) -> None:
    """Start the engine, with a watchdog that ends it should this process die without closing it."""
    before = set(engine_watchdog.engine_children())
    guard.pids = []  # a restart: the old engine is gone, the new one is not known yet
    with python_signal_handlers():
        guard.call("init", game.init, expected_s=INIT_S)
    guard.watch(sorted(set(engine_watchdog.engine_children()) - before))
    engine_watchdog.watch(guard.pids)


class DoomEnv:
    """One ViZDoom game. Not thread-safe: call it from one thread.

    The labels buffer is on unless labels=False (a pixel-only game: the label-buffer frame line and the scripted
    players need it; the screen detector does not);
    `privileged_objects` adds every map object to Frame.objects. `episode_timeout_tics`
    overrides the scenario's timeout, counted from its start tic (defend_the_center starts at 10).
    Every call that waits for the engine raises EngineDied / EngineHung (envs.engine_guard) instead of
    hanging when the engine process dies or stops answering; the env is unusable after that.
    """

    def __init__(
        self,
        scenario: str = "defend_the_center",
        *,
        resolution: str = "160x120",
        clock: str = "sync",
        seed: int | None = None,
        window: bool = False,
        privileged_objects: bool = False,
        episode_timeout_tics: int | None = None,
        labels: bool = True,
    ):
        if clock not in CLOCKS:
            raise ValueError(f"unknown clock '{clock}'; use one of: {', '.join(CLOCKS)}")
        if episode_timeout_tics is not None and episode_timeout_tics < 1:
            raise ValueError("episode_timeout_tics must be >= 1 (or None for the scenario's own timeout)")
        self.config_path = resolve_scenario(scenario)
        self.scenario = self.config_path.stem
        self.clock = clock
        self.seed = seed
        self.privileged_objects = privileged_objects
        self.episode = -1  # index of the current episode; -1 before the first new_episode
        self.episode_seed: int | None = None
        self._needs_reinit = False  # 1.3.2 freezes on a plain new_episode after a recording or replay
        self._reward_mark = 0.0
        self._tic_seen = 0  # the episode clock's last value (see tic)
        self._closed = False

        game = vzd.DoomGame()
        game.load_config(str(self.config_path))
        ENGINE_INI.parent.mkdir(parents=True, exist_ok=True)
        game.set_doom_config_path(str(ENGINE_INI))
        game.set_screen_resolution(_resolution(resolution))
        game.set_screen_format(vzd.ScreenFormat.RGB24)
        game.set_window_visible(window)
        game.set_sound_enabled(False)
        game.set_mode(vzd.Mode.ASYNC_PLAYER if clock == "realtime" else vzd.Mode.PLAYER)
        game.set_labels_buffer_enabled(labels)
        if not labels:  # a pixel-only game: no hidden state but the HUD's variables
            game.set_depth_buffer_enabled(False)
            game.set_automap_buffer_enabled(False)
        game.set_objects_info_enabled(privileged_objects)
        if episode_timeout_tics is not None:
            game.set_episode_timeout(episode_timeout_tics)
        present = {v.name for v in game.get_available_game_variables()}
        for name in FRAME_VARIABLES:
            if name not in present:
                game.add_available_game_variable(getattr(vzd.GameVariable, name))
        if seed is not None:
            game.set_seed(seed)
        self._guard = EngineGuard(self.scenario)
        try:
            _init_watched(game, self._guard)
        except BaseException:
            self._guard.stop()
            raise
        self._game = game
        self._buttons = tuple(b.name for b in game.get_available_buttons())
        self._variable_names = tuple(v.name for v in game.get_available_game_variables())
        self._noop = [0.0] * len(self._buttons)
        self.resolution = (game.get_screen_height(), game.get_screen_width())

    # --- properties -------------------------------------------------------------------------

    @property
    def buttons(self) -> tuple[str, ...]:
        """Button names of the scenario, in action-vector order."""
        return self._buttons

    @property
    def game(self) -> vzd.DoomGame:
        """The underlying DoomGame, for what this class does not wrap."""
        return self._game

    @property
    def episode_finished(self) -> bool:
        return self._game.is_episode_finished()

    @property
    def total_reward(self) -> float:
        return float(self._game.get_total_reward())

    @property
    def kills(self) -> int:
        return int(self._game.get_game_variable(vzd.GameVariable.KILLCOUNT))

    @property
    def tic(self) -> int:
        """Episode tic as of the last action call (in realtime the world may be ahead of it).

        ViZDoom resets its episode clock to 0 when an episode ends by a kill (basic: -14 tics played); the
        tic it ended on (the last action's end) stands instead."""
        now = int(self._game.get_episode_time())
        if now >= self._tic_seen:
            self._tic_seen = now
        return self._tic_seen

    @property
    def episode_timeout_tics(self) -> int:
        """Tics an episode may last after its start tic; 0 means no timeout."""
        return int(self._game.get_episode_timeout())

    @property
    def timed_out(self) -> bool:
        """The episode ended because its time ran out (not by death or by reaching the goal)."""
        timeout = self.episode_timeout_tics
        return (
            self._game.is_episode_finished()
            and not self._game.is_player_dead()
            and timeout > 0
            and self.tic >= self._game.get_episode_start_time() + timeout
        )

    # --- episodes ---------------------------------------------------------------------------

    def new_episode(self, record_path: str | Path | None = None, *, seed: int | None = None) -> Frame:
        """Start the next episode (recorded to a .lmp when record_path is given) and return its first frame.

        Seeding: an explicit `seed` wins; else with a constructor seed S, episode k uses S + k,
        so every episode is reproducible on its own.
        """
        self._check_open()
        if record_path is None and self._needs_reinit:
            # ViZDoom 1.3.2: a plain new_episode after a recorded episode or a replay leaves the tic frozen.
            self._close_game()
            _init_watched(self._game, self._guard)
            self._needs_reinit = False
        self.episode += 1
        if seed is None and self.seed is not None:
            seed = self.seed + self.episode
        self.episode_seed = seed
        if seed is not None:
            self._game.set_seed(seed)
        if record_path is not None:
            Path(record_path).parent.mkdir(parents=True, exist_ok=True)
            self._guard.call("new_episode", self._game.new_episode, str(record_path), expected_s=EPISODE_S)
            self._needs_reinit = True
        else:
            self._guard.call("new_episode", self._game.new_episode, expected_s=EPISODE_S)
        self._reward_mark = self.total_reward
        self._tic_seen = 0
        frame = self.read_frame()
        if frame is None:
            raise RuntimeError(f"scenario {self.scenario}: the episode ended before its first frame")
        return frame

    def read_frame(self) -> Frame | None:
        """The current state as a Frame, or None when the episode is finished.

        Realtime: the engine only publishes a new state on an action call, so this first waits
        for the next tic (at most ~29 ms, buttons stay as they are) so the frame is at most one tic old.
        """
        self._check_open()
        game = self._game
        if self.clock == "realtime" and not game.is_episode_finished():
            self._guard.call("advance_action", game.advance_action, 1, expected_s=1 / TICS_PER_SECOND)
        if game.is_episode_finished():
            return None
        state = game.get_state()
        t_read = time.monotonic()
        if state is None:
            return None
        values = state.game_variables
        variables = {name: float(values[i]) for i, name in enumerate(self._variable_names)}
        objects = tuple(_world_object(o) for o in state.objects) if self.privileged_objects and state.objects else ()
        return Frame(
            tic=int(state.tic),
            t_read=t_read,
            screen=state.screen_buffer,
            labels=tuple(_label(lab) for lab in state.labels or ()),  # none without the label buffer
            variables=variables,
            episode=self.episode,
            objects=objects,
        )

    def action_vector(self, buttons: Mapping[str, float] | Sequence[float]) -> list[float]:
        """Turn {"ATTACK": 1} or a full vector into the engine's action list; reject unknown names."""
        if isinstance(buttons, Mapping):
            vector = list(self._noop)
            for name, value in buttons.items():
                try:
                    vector[self._buttons.index(name)] = float(value)
                except ValueError:
                    raise ValueError(
                        f"unknown button '{name}' for scenario {self.scenario}; allowed: {', '.join(self._buttons)}"
                    ) from None
            return vector
        vector = [float(v) for v in buttons]
        if len(vector) != len(self._buttons):
            raise ValueError(
                f"action has {len(vector)} values, scenario {self.scenario} has {len(self._buttons)} buttons: "
                f"{', '.join(self._buttons)}"
            )
        return vector

    def act(self, buttons: Mapping[str, float] | Sequence[float], tics: int = 1) -> float:
        """Hold `buttons` for `tics` tics; return the reward gained since the previous act/advance.

        Sync: exactly `tics` tics pass. Realtime: blocks ~`tics` tics, then releases every button
        (one more tic), so nothing stays pressed while the caller thinks.
        """
        self._check_open()
        if tics < 1:
            raise ValueError("tics must be >= 1")
        vector = self.action_vector(buttons)
        if self._game.is_episode_finished():
            return 0.0
        self._make_action(vector, tics)
        if self.clock == "realtime" and not self._game.is_episode_finished():
            self._make_action(self._noop, 1)
        return self._take_reward()

    def advance(self, tics: int) -> float:
        """Let `tics` tics pass with no button pressed (sync: charges compute time to the world).

        Realtime: a no-op, the world advances by itself.
        """
        self._check_open()
        if tics < 0:
            raise ValueError("tics must be >= 0")
        if self.clock == "sync" and tics > 0 and not self._game.is_episode_finished():
            self._make_action(self._noop, tics)
        return self._take_reward()

    def replay(self, lmp_path: str | Path) -> Iterator[Frame]:
        """Replay a .lmp recorded with this scenario, yielding every frame (frame-exact in sync)."""
        self._check_open()
        path = Path(lmp_path)
        if not path.is_file():
            raise FileNotFoundError(f"recording not found: {path}")
        self.episode += 1
        self._guard.call("replay_episode", self._game.replay_episode, str(path), expected_s=EPISODE_S)
        self._needs_reinit = True
        self._reward_mark = self.total_reward
        while True:
            frame = self.read_frame()
            if frame is None:
                return
            yield frame
            if self.clock == "sync":
                self._guard.call("advance_action", self._game.advance_action, 1)

    def _make_action(self, vector: list[float], tics: int) -> None:
        # realtime: the call itself lasts `tics` tics; sync: as long as the engine takes to compute them
        expected = tics / TICS_PER_SECOND if self.clock == "realtime" else tics * SYNC_TIC_S
        before = self.tic
        self._guard.call("make_action", self._game.make_action, vector, tics, expected_s=expected)
        if int(self._game.get_episode_time()) < before:  # the clock was reset: the episode ended within this action
            self._tic_seen = before + tics

    def _take_reward(self) -> float:
        total = self.total_reward
        reward, self._reward_mark = total - self._reward_mark, total
        return reward

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("DoomEnv is closed")
        if self._guard.failure is not None:
            raise EngineDied(str(self._guard.failure))

    @property
    def engine_failure(self) -> EngineDied | None:
        """Why the engine is gone (None while it runs)."""
        return self._guard.failure

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._guard.failure is not None:  # ViZDoom closed its side, or the game is abandoned
                self._guard.stop()
                return
            try:
                self._close_game()
            finally:
                self._guard.stop()

    def _close_game(self) -> None:
        """game.close() waits for the engine to exit while holding the GIL, so a stuck engine would freeze the
        whole process (no thread could step in): a shell timer kills the engine if the close takes too long."""
        timer = engine_watchdog.kill_later(self._guard.pids, CLOSE_S)
        try:
            with python_signal_handlers():
                self._game.close()
        finally:
            if timer is not None:
                timer.kill()
                timer.wait()

    def __enter__(self) -> DoomEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # best effort: a forgotten env should not leave the engine process running
        try:
            self.close()
        except Exception:
            pass
