"""A timed live session that plays several episodes records every one in its own replayable directory."""

from agent_runtime.config import load_config
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import run_live
from agent_runtime.session.runtime import Runtime
from agent_runtime.model.model_loader import load_model
from agent_runtime.recording.episode_recorder import episode_manifest
from agent_runtime.recording.live_recordings import LiveRecordings
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.replay_check import check_replay
from envs.doom_env import DoomEnv


def test_every_episode_of_a_timed_live_session_is_recorded_and_replays_frame_exact(tmp_path):
    config = load_config(None, scenario="defend_the_center", clock="realtime")
    loaded = load_model("tiny:llama")

    def manifest_for(index):
        return episode_manifest(config, policy="live", env_seed=config.seed + index, agent_seed=0, index=index,
                                model_spec="tiny:llama", loaded=loaded, clock="realtime")

    announced = []
    recordings = LiveRecordings(tmp_path, manifest_for, scenario=config.scenario, announce=announced.append)
    try:
        # 35 tics = 1 s episodes: a 2.6 s session plays three of them
        with DoomEnv(config.scenario, clock="realtime", seed=config.seed, episode_timeout_tics=35) as env:
            runtime = Runtime.build(loaded, config, env.buttons, scenario=env.scenario)
            result = run_live(env, runtime, seconds=2.6, generation=SessionGeneration(), recordings=recordings)
    finally:
        recordings.close()
    assert result["episodes"] >= 2
    assert announced == recordings.dirs and len(recordings.dirs) == result["episodes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(d.name for d in recordings.dirs)
    for index, directory in enumerate(recordings.dirs):
        recording = Recording.open(directory)
        assert recording.manifest.extra["episode"] == index and recording.manifest.seeds["env"] == config.seed + index
        assert recording.manifest.lmp["blake2b"]
        frames = recording.of_kind("frame_read")
        assert len(frames) > (5 if index < len(recordings.dirs) - 1 else 0)  # the last may have just begun
        report = check_replay(recording)
        assert report.ok and report.n_checked == len(frames), report.describe()
