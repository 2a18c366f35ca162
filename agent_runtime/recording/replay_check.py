"""Re-render a recording's episode from its .lmp and compare screens with what the live run saw.

ViZDoom replays a .lmp frame-exact, so a screen hash that differs from its frame_read event means the recording
(or the engine's frame path) is not what it claims to be.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from envs.doom_env import DoomEnv
from envs.scenarios import ScenarioError

from agent_runtime import signals
from agent_runtime.errors import UserError, first_line
from agent_runtime.recording.engine_paths import demo_problem, engine_readable_lmp
from agent_runtime.recording.manifest import MANIFEST_FILE, hash_file
from agent_runtime.recording.recording import Recording, screen_hash
from agent_runtime.session.events import Kind


def check_lmp_belongs(recording: Recording) -> None:
    """UserError unless the .lmp exists, is whole and is the one this manifest's scenario recorded."""
    lmp, manifest_path = recording.lmp_path, recording.dir / MANIFEST_FILE
    extra = recording.manifest.extra
    if not lmp.is_file() and extra.get("complete") is False:
        raise UserError(f"{recording.dir}: an incomplete recording (the run ended early: {extra.get('end_reason')}) "
                        f"without a .lmp to replay; its events.jsonl holds what happened until then")
    if not lmp.is_file():
        raise UserError(f"{lmp}: not found; the .lmp is written when the episode ends or the DoomEnv closes "
                        f"(a run stopped mid-episode leaves no .lmp)")
    problem = demo_problem(lmp)
    if problem is not None:  # the engine would crash on it
        raise UserError(f"{lmp}: {problem}; ViZDoom cannot replay a cut demo (its write failed: a full disk?); "
                        f"its events.jsonl holds what happened (`agent-runtime timeline`)")
    recorded = recording.manifest.lmp or {}
    lmp_scenario = recorded.get("scenario")
    if lmp_scenario is not None and lmp_scenario != recording.manifest.scenario:
        raise UserError(f"{lmp} was recorded on scenario '{lmp_scenario}' but {manifest_path} says "
                        f"'{recording.manifest.scenario}'")
    expected = recorded.get("blake2b")
    if expected is not None and hash_file(lmp) != expected:
        raise UserError(f"{lmp} is not the .lmp this recording made (its hash differs from the one in "
                        f"{manifest_path}); a .lmp from another episode or scenario (this one is "
                        f"'{recording.manifest.scenario}') replays wrong frames")


@contextmanager
def replayed_frames(recording: Recording) -> Iterator[Iterator]:
    """Frames of the recording's .lmp, replayed in a fresh sync DoomEnv of the manifest's scenario."""
    check_lmp_belongs(recording)
    scenario, resolution = recording.manifest.scenario, str(recording.manifest.config.get("resolution", "160x120"))
    try:
        env = DoomEnv(scenario, resolution=resolution, clock="sync")
    except ScenarioError as e:
        raise UserError(f"{recording.dir / MANIFEST_FILE}: {e}") from None
    except Exception as e:  # the engine's own errors: a broken .cfg or WAD
        raise UserError(f"ViZDoom could not start scenario '{scenario}' for {recording.lmp_path}: "
                        f"{first_line(e)}") from None
    with env, engine_readable_lmp(recording.lmp_path) as lmp:
        yield _guarded(env.replay(lmp), recording)


def _guarded(frames: Iterator, recording: Recording) -> Iterator:
    """The engine's errors mid-replay as one UserError line."""
    try:
        yield from frames
    except Exception as e:
        raise UserError(f"ViZDoom could not replay {recording.lmp_path}: {first_line(e)}") from None


@dataclass
class ReplayReport:
    recording: str
    scenario: str
    n_frames_replayed: int = 0
    n_checked: int = 0
    n_mismatched: int = 0
    n_missing: int = 0  # frame_read tics the replay never reached
    first_mismatch: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.n_mismatched == 0 and self.n_missing == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def describe(self) -> str:
        lines = [f"{self.recording}: {self.n_checked} frames checked, {self.n_mismatched} mismatched, "
                 f"{self.n_missing} missing ({self.n_frames_replayed} replayed, scenario {self.scenario})"]
        if self.first_mismatch:
            m = self.first_mismatch
            lines.append(f"first mismatch at tic {m['tic']} (event seq {m['seq']}): "
                         f"recorded {m['recorded']}, replayed {m['replayed']}")
        lines += [f"note: {n}" for n in self.notes]
        lines.append("OK: the replay matches the recording" if self.ok
                     else "MISMATCH: the replay differs from the recording")
        return "\n".join(lines)


@signals.stoppable()
def check_replay(recording: Recording) -> ReplayReport:
    """Compare replayed screen hashes with the frame_read events' payload["screen_hash"], tic by tic."""
    report = ReplayReport(recording=str(recording.dir), scenario=recording.manifest.scenario)
    expected: dict[int, list[tuple[int, str]]] = {}
    for event in recording.of_kind(Kind.FRAME_READ):
        recorded = event.payload.get("screen_hash")
        if event.tic is not None and isinstance(recorded, str):
            expected.setdefault(event.tic, []).append((event.seq, recorded))
    report.notes += recording.warnings
    extra = recording.manifest.extra
    if extra.get("complete") is False:
        why = extra.get("write_error") or extra.get("end_reason")  # a write failure: the run may have played on
        report.notes.append(f"incomplete recording: it ends early ({why})")
    if not expected:
        report.notes.append("no frame_read events with a tic and a screen_hash: nothing to compare")
    last_tic = max(expected, default=-1)
    with replayed_frames(recording) as frames:
        for frame in frames:
            signals.check()  # SIGINT/SIGTERM: stop between two frames
            report.n_frames_replayed += 1
            checks = expected.pop(frame.tic, ())  # what is left in `expected` at the end is missing
            replayed = screen_hash(frame.screen) if checks else None
            for seq, recorded in checks:
                report.n_checked += 1
                if recorded != replayed:
                    report.n_mismatched += 1
                    if report.first_mismatch is None:
                        report.first_mismatch = {"tic": frame.tic, "seq": seq, "recorded": recorded,
                                                 "replayed": replayed}
            if frame.tic >= last_tic:
                break
    report.n_missing = sum(map(len, expected.values()))
    if report.n_checked and report.n_mismatched == report.n_checked:
        report.notes.append("every frame differs: the .lmp may come from another scenario, resolution or episode")
    return report
