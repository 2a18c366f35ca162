"""One recording directory per episode: its manifest, its event bus (the sink: events.jsonl), its .lmp and WAVs;
RecordedEnv records a player that takes no bus or .lmp path. The manifest holds everything `replay --rerun` needs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from agent_runtime.session.clocks import MS_PER_TIC, FixedCost
from agent_runtime.config import RunConfig
from agent_runtime.errors import UserError
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.recording.engine_paths import demo_problem, fits_engine, short_temp_dir
from agent_runtime.recording.event_log import EVENTS_FILE, EventLogWriter
from agent_runtime.recording.manifest import MANIFEST_FILE, Manifest, hash_file
from agent_runtime.recording.recording import LMP_FILE, WAV_FILES, screen_hash
from agent_runtime.recording.wav_writer import WavWriter
from agent_runtime.recording.write_guard import END_REASON as WRITE_FAILED
from agent_runtime.recording.write_guard import WriteGuard


def episode_manifest(config: RunConfig, *, policy: str, env_seed: int, agent_seed: int | None, index: int,
                     model_spec: str | None = None, loaded=None, model_seed: int | None = None,
                     fixed_cost: FixedCost | None = None, think_tokens: int | None = None,
                     max_tics: int | None = None, lag_tics: int = 0, clock: str | None = None,
                     bounds=None, frames: dict | None = None) -> Manifest:
    """The manifest of one episode. `loaded` (a model policy's LoadedModel) gives the model, weight hash, threads,
    CpuPath and adapter (its path goes into config.model.adapter for a rerun); config.model.path/dtype/threads are
    set to what really ran. `clock` names the clock when it is not the one the policy implies (a live session:
    "realtime"); `bounds` the TimeBounds the session ran under (budgets.max_action_age_ms auto becomes its bound);
    `frames` what wrote the frame blocks (Runtime.frame_identity: the source, the screen detector's hash a rerun
    checks)."""
    cpu, adapter = getattr(loaded, "cpu", None), getattr(loaded, "adapter", None)
    data = config.model_dump()
    if loaded is not None:
        data["model"].update(path=model_spec, adapter=getattr(adapter, "path", None))
    data["model"].update(threads=getattr(cpu, "threads", None), **({"dtype": cpu.dtype} if cpu is not None else {}))
    if bounds is not None:
        data["budgets"]["max_action_age_ms"] = bounds.max_action_age_ms
    seeds = {"run": config.seed, "env": env_seed, "agent": agent_seed,
             **({"model": model_seed} if model_seed is not None else {})}
    manifest = Manifest.build(
        data, model_id=getattr(loaded, "model_id", None), model_weight_hash=getattr(loaded, "weight_hash", None),
        seeds=seeds, policy=policy, episode=index, think_tokens=think_tokens, max_tics=max_tics,
        lag_tics=lag_tics, fixed_cost=asdict(fixed_cost) if fixed_cost is not None else None,
        **({"cpu_path": cpu.summary()} if cpu is not None else {}),
        **({"adapter": asdict(adapter)} if adapter is not None else {}),
        **(frames or {}),
    )
    # the clock that moved the world: the baselines' own tics, a fixed cost per token, or compute time
    manifest.clock = clock or ("policy_tics" if loaded is None else "fixed_cost" if fixed_cost else "compute")
    return manifest


class EpisodeRecording:
    """An open recording with its own bus, whose sink is the event log; .lmp_path is the .lmp to record to. Close
    the DoomEnv first (it finishes the .lmp), then this: it stores the .lmp's hash (and moves it in from a short
    staging path when the directory's is too long)."""

    def __init__(self, directory: Path, manifest: Manifest, *, guard: WriteGuard | None = None):
        """guard: shared by the run's recordings; a failed write (a full disk) stops them all, never the play."""
        self.dir = directory
        self.manifest = manifest
        self.manifest_path = directory / MANIFEST_FILE
        self.final_lmp_path = directory / LMP_FILE  # where the finished .lmp lies once the recording is closed
        self.guard = guard or WriteGuard()
        self.events = EventLogWriter(directory / EVENTS_FILE, guard=self.guard)
        self.bus = EventBus(directory.name, clock=manifest.clock, keep=False)
        self.bus.sinks.append(self.events)
        self._wavs: dict[str, WavWriter] = {}
        self._staging_dir: Path | None = None
        self.closed = False

    @classmethod
    def create_at(cls, directory: str | Path, manifest: Manifest, *,
                  guard: WriteGuard | None = None) -> EpisodeRecording:
        """Make DIR (and parents), write the manifest, open the event log; never overwrites an existing recording."""
        path = Path(directory).expanduser()
        if (path / MANIFEST_FILE).exists():
            raise UserError(f"{path} already holds a recording; choose a new directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
            manifest.write(path / MANIFEST_FILE)
        except OSError as e:
            raise UserError(f"cannot create recording directory {path}: {e.strerror or e}") from None
        return cls(path, manifest, guard=guard)

    @classmethod
    def create(cls, root: str | Path, manifest: Manifest, *, scenario: str, index: int,
               guard: WriteGuard | None = None, mid_run: bool = False) -> EpisodeRecording | None:
        """A fresh directory <root>/<scenario>-seed<S>-ep<NNN>-<timestamp>[-n]; UserError when it cannot be made.
        mid_run: None (play on unrecorded) instead once the run's recordings stopped: a directory that cannot be
        made mid-run (a full disk) is the guard's one line, not an error."""
        if mid_run and guard.failed:
            return None
        base = Path(root).expanduser() / (f"{Path(scenario).stem}-seed{manifest.seeds.get('env')}-ep{index:03d}-"
                                          f"{time.strftime('%Y%m%d-%H%M%S')}")
        path, n = base, 1
        while path.exists():
            path, n = base.with_name(f"{base.name}-{n}"), n + 1
        try:
            return cls.create_at(path, manifest, guard=guard)
        except UserError as e:
            if not mid_run:
                raise
            guard.report(root, e)
            return None

    @property
    def lmp_path(self) -> Path:
        """Pass this to DoomEnv.new_episode(record_path=...): the final path, or a short staging one."""
        final = self.final_lmp_path.resolve()
        if self.closed or fits_engine(final):
            return final
        if self._staging_dir is None:
            self._staging_dir = short_temp_dir(final)
        return self._staging_dir / LMP_FILE

    def wav(self, name: str, rate: int, channels: int = 1) -> WavWriter:
        """The WAV writer for "mic_in" or "speech_out" (what the voice writes), opened on first use."""
        if name not in self._wavs:
            self._wavs[name] = WavWriter(self.dir / WAV_FILES[name], rate, channels, guard=self.guard)
        return self._wavs[name]

    def close(self, end_reason: str | None = None, detail: str | None = None) -> None:
        """end_reason (the episode was cut short): a session_end event says why, and the manifest complete: false."""
        if self.closed:
            return
        if end_reason is not None:
            self.bus.emit(Kind.SESSION_END, "runtime", reason=end_reason, **({"detail": detail} if detail else {}))
        self.manifest.extra.update(complete=end_reason is None, **({"end_reason": end_reason} if end_reason else {}))
        self.closed = True
        self.events.close()
        for wav in self._wavs.values():
            wav.close()
        try:
            self._finish_lmp()
        except OSError as e:
            self.guard.report(self.final_lmp_path, e)
        self.manifest.extra["audio"] = sorted(WAV_FILES[n] for n in self._wavs)
        if self.guard.failed:  # the files stop where the disk failed: say so, if the manifest still fits
            self.manifest.extra.update(complete=False, write_error=self.guard.error,
                                       events_written=self.events.n_written)
            self.manifest.extra.setdefault("end_reason", WRITE_FAILED)
        try:
            self.manifest.write(self.manifest_path)  # atomic: on failure the manifest written at the start stays
        except OSError as e:
            self.guard.report(self.manifest_path, e)

    def _finish_lmp(self) -> None:
        """Move a staged .lmp into the directory, hash it into the manifest and check that the engine wrote it whole."""
        if self._staging_dir is not None:
            staged = self._staging_dir / LMP_FILE
            if staged.is_file():
                shutil.move(staged, self.final_lmp_path)
            shutil.rmtree(self._staging_dir, ignore_errors=True)
        if not self.final_lmp_path.is_file():
            return
        self.manifest.lmp = {"file": LMP_FILE, "scenario": self.manifest.scenario,
                             "blake2b": hash_file(self.final_lmp_path)}
        problem = demo_problem(self.final_lmp_path)
        if problem is not None:  # the engine's own write failed (a full disk): say so, as for our own writes
            self.manifest.lmp.update(complete=False, problem=problem)
            if "end_reason" not in self.manifest.extra:  # an episode cut off (engine died, stopped) says why itself
                self.guard.report(self.final_lmp_path, OSError(f"ViZDoom left its demo {problem} (a full disk?)"))


class RecordedEnv:
    """A DoomEnv seen through a recording, for players that take no bus or .lmp path (baselines, the sequential
    agent): records the .lmp on new_episode, emits frame_read (with the screen hash `replay` checks) for every frame
    read and, when asked, action_executed for every act(); everything else passes through."""

    def __init__(self, env, recording: EpisodeRecording, *, emit_actions: bool = True):
        self._env, self._recording, self._emit_actions = env, recording, emit_actions

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _frame_read(self, frame):
        if frame is not None:
            self._recording.bus.emit(Kind.FRAME_READ, "frames", tic=frame.tic, sim_ms=frame.tic * MS_PER_TIC,
                                     screen_hash=screen_hash(frame.screen) if frame.screen is not None else None)
        return frame

    def new_episode(self, record_path: str | Path | None = None, *, seed: int | None = None):
        return self._frame_read(self._env.new_episode(record_path or self._recording.lmp_path, seed=seed))

    def read_frame(self):
        return self._frame_read(self._env.read_frame())

    def act(self, buttons: Mapping[str, float] | Sequence[float], tics: int = 1) -> float:
        if self._emit_actions:
            pressed = ({k: v for k, v in buttons.items() if v} if isinstance(buttons, Mapping)
                       else {name: v for name, v in zip(self._env.buttons, buttons) if v})
            self._recording.bus.emit(Kind.ACTION_EXECUTED, "policy", tic=self._env.tic,
                                     sim_ms=self._env.tic * MS_PER_TIC, action=pressed, tics=tics)
        return self._env.act(buttons, tics)
