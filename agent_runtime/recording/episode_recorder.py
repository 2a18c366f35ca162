"""One recording directory per `agent-runtime episode` episode: its manifest, its event bus, its .lmp.

The manifest holds everything `replay --rerun` needs. Close order: the DoomEnv first (ViZDoom finishes the .lmp
only then), then the recording, which stores the finished .lmp's hash.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from agent_runtime.clocks import FixedCost
from agent_runtime.config import RunConfig
from agent_runtime.errors import UserError
from agent_runtime.events import EventBus, Kind
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.recording import RecordingWriter
from agent_runtime.recording.write_guard import WriteGuard


def episode_manifest(config: RunConfig, *, policy: str, env_seed: int, agent_seed: int | None, index: int,
                     model_spec: str | None = None, loaded=None, model_seed: int | None = None,
                     fixed_cost: FixedCost | None = None, think_tokens: int | None = None,
                     max_tics: int | None = None, lag_tics: int = 0, clock: str | None = None,
                     bounds=None) -> Manifest:
    """The manifest of one episode. `loaded` (a model policy's LoadedModel) gives the model, weight hash, threads,
    CpuPath and adapter (its path goes into config.model.adapter for a rerun); config.model.path/dtype/threads are
    set to what really ran. `clock` names the clock when it is not the one the policy implies (a live session:
    "realtime"); `bounds` the TimeBounds the session ran under (budgets.max_action_age_ms auto becomes its bound)."""
    cpu, adapter = (loaded.cpu, loaded.adapter) if loaded is not None else (None, None)
    threads = cpu.threads if cpu is not None else None
    data = config.model_dump()
    if loaded is not None:
        data["model"].update(path=model_spec, adapter=adapter.path if adapter is not None else None)
    data["model"]["threads"] = threads
    if cpu is not None:
        data["model"]["dtype"] = cpu.dtype
    if bounds is not None:
        data["budgets"]["max_action_age_ms"] = bounds.max_action_age_ms
    seeds = {"run": config.seed, "env": env_seed, "agent": agent_seed,
             **({"model": model_seed} if model_seed is not None else {})}
    manifest = Manifest.build(
        data, model_id=getattr(loaded, "model_id", None), model_weight_hash=getattr(loaded, "weight_hash", None),
        seeds=seeds, threads=threads, policy=policy, episode=index, think_tokens=think_tokens, max_tics=max_tics,
        lag_tics=lag_tics, fixed_cost=asdict(fixed_cost) if fixed_cost is not None else None,
        **({"cpu_path": cpu.summary()} if cpu is not None else {}),
        **({"adapter": adapter.summary()} if adapter is not None else {}),
    )
    # the clock that moved the world: compute time, a fixed cost per token, or the baselines' own tics
    model_clock = "fixed_cost" if fixed_cost is not None else "compute"
    manifest.clock = clock or (model_clock if loaded is not None else "policy_tics")
    return manifest


class EpisodeRecording(RecordingWriter):
    """An open episode recording with its own bus, whose sink is the event log; .lmp_path is the .lmp to record to."""

    def __init__(self, directory: Path, manifest: Manifest, *, guard: WriteGuard | None = None):
        super().__init__(directory, manifest, guard=guard)
        self.writer = self  # what the voice writes its audio to (wav())
        self.bus = EventBus(directory.name, clock=manifest.clock, keep=False)
        self.bus.sinks.append(self)

    @classmethod
    def create(cls, root: str | Path, manifest: Manifest, *, scenario: str, index: int,
               guard: WriteGuard | None = None) -> EpisodeRecording:
        """A fresh directory <root>/<scenario>-seed<S>-ep<NNN>-<timestamp>[-n]; UserError when it cannot be made."""
        base = Path(root).expanduser() / (f"{Path(scenario).stem}-seed{manifest.seeds.get('env')}-ep{index:03d}-"
                                          f"{time.strftime('%Y%m%d-%H%M%S')}")
        path, n = base, 1
        while path.exists():
            path, n = base.with_name(f"{base.name}-{n}"), n + 1
        return super().create(path, manifest, guard=guard)

    @classmethod
    def create_mid_run(cls, root: str | Path, manifest: Manifest, *, scenario: str, index: int,
                       guard: WriteGuard) -> EpisodeRecording | None:
        """The next episode's recording, or None (play on unrecorded) once the run's recordings stopped: a
        directory that cannot be made mid-run (a full disk) is the guard's one line, not an error."""
        if guard.failed:
            return None
        try:
            return cls.create(root, manifest, scenario=scenario, index=index, guard=guard)
        except UserError as e:
            guard.report(root, e)
            return None

    def close(self, end_reason: str | None = None, detail: str | None = None) -> None:
        """Only after the env that recorded the .lmp is closed. end_reason (the episode did not run to its end): a
        session_end event says why and the manifest says complete: false."""
        if self.closed:
            return
        if end_reason is not None:
            self.bus.emit(Kind.SESSION_END, "runtime", reason=end_reason, **({"detail": detail} if detail else {}))
        self.manifest.extra.update(complete=end_reason is None, **({"end_reason": end_reason} if end_reason else {}))
        super().close()
