"""CLI conventions every command keeps (#34): the config is the base that flags override, one name per thing, a
description in every help, --json where there is a result, -v/-q through logging, progress bars with an ETA, and a
bad output location refused in one line (exit 2) before any long work."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
import typing
from pathlib import Path

import pytest
import yaml

from agent_runtime.cli import COMMANDS, build_parser, main
from agent_runtime.commands import OPTIONS
from agent_runtime.config import RunConfig, VoiceConfig, from_args
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
MODEL_COMMANDS = (["episode"], ["live"], ["collect"], ["train"], ["bench", "kv"], ["bench", "reaction"],
                  ["bench", "play"], ["bench", "voice"], ["bench", "memory"], ["bench", "soak"])
RESULT_COMMANDS = (["episode"], ["live"], ["collect"], ["train"], ["replay"], ["timeline"], ["transcribe"],
                   *(["bench", name] for name in ("kv", "reaction", "play", "voice", "memory", "interrupt", "soak")))


def _subparsers(parser: argparse.ArgumentParser, path=()):
    """(command path, parser) of every command and bench, at any depth."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subparsers(sub, (*path, name))


def _parser_of(words: list[str]) -> argparse.ArgumentParser:
    return dict(_subparsers(build_parser()))[tuple(words)]


def _dests(words: list[str]) -> set[str]:
    return {a.dest for a in _parser_of(words)._actions}


def _config(tmp_path: Path, **keys) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(keys))
    return path


# 1. the config is the base -----------------------------------------------------------------------------------------

def test_flags_override_the_config_only_when_given(tmp_path):
    config_path = _config(tmp_path, scenario="basic", seed=7, model={"path": "tiny:llama", "dtype": "float32"})
    given = argparse.Namespace(config=str(config_path), scenario=None, seed=3, model=None, dtype=None, threads=None)
    config = from_args(given)
    assert (config.scenario, config.seed, config.model.path, config.model.dtype) == ("basic", 3, "tiny:llama",
                                                                                      "float32")
    assert (given.scenario, given.seed, given.model, given.dtype) == ("basic", 3, "tiny:llama", "float32")
    for words in (["collect", "--out", "x", "--episodes", "1"], ["bench", "play"], ["bench", "voice"], ["live"],
                  ["episode"]):  # no command's own default hides the config's value
        args = build_parser().parse_args(words)
        assert args.scenario is None and getattr(args, "dtype", None) is None, words


def test_collect_plays_the_scenario_of_its_config(tmp_path):
    out = tmp_path / "data"
    proc = run_cli("collect", "--config", _config(tmp_path, scenario="basic"), "--model", "tiny:llama",
                   "--fixed-cost", "--threads", "1", "--episodes", "1", "--max-tics", "30", "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    totals = json.loads(proc.stdout)
    assert totals == {"out": str(out), "episodes": 1, "decisions": totals["decisions"]} and totals["decisions"] > 0
    assert json.loads((out / "manifest.json").read_text())["scenario"] == "basic"


def test_bench_play_takes_the_configs_scenario_and_model_and_names_agents_as_episode_does(tmp_path):
    config = _config(tmp_path, scenario="basic", model={"path": "tiny:llama"})
    proc = run_cli("bench", "play", "--config", config, "--agents", "multi_stream,scripted", "--episodes", "2",
                   "--max-tics", "30", "--fixed-cost", "--threads", "1", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out" / "play.json").read_text())
    assert result["scenario"] == "basic" and result["machine"]["model"] == "tiny:llama"
    assert list(result["agents"]) == ["llm", "scripted"]  # multi_stream: llm's old name
    assert "sample std" in proc.stdout  # 8. the spread the table shows is named


# 2. one name per thing ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("words", MODEL_COMMANDS, ids=" ".join)
def test_device_and_dtype_wherever_a_model_loads(words):
    assert {"device", "dtype"} <= _dests(words)


def test_old_names_are_aliases_of_the_one_name():
    parse = build_parser().parse_args
    assert parse(["episode", "--policy", "multi_stream"]).policy == "llm"
    assert parse(["bench", "interrupt", "--mode", "pause_confirm"]).barge_in == "pause_confirm"
    assert parse(["bench", "interrupt", "--barge-in", "immediate"]).barge_in == "immediate"
    assert parse(["live", "--barge-in", "half_duplex"]).barge_in == "half_duplex"
    assert OPTIONS["--barge-in"]["choices"] == typing.get_args(VoiceConfig.model_fields["barge_in"].annotation)


# 3. and 4. every help has a description; --json wherever there is a result -----------------------------------------

def test_every_command_and_bench_has_a_description_and_the_verbosity_flags():
    found = dict(_subparsers(build_parser()))
    assert {("bench", "kv"), ("bench", "soak"), ("train",)} <= set(found) and len(found) >= len(COMMANDS) + 7
    for words, parser in found.items():
        help_text = parser.format_help()
        assert parser.description and len(parser.description) > 20, words
        assert "--verbose" in help_text and "--quiet" in help_text, words


@pytest.mark.parametrize("words", RESULT_COMMANDS, ids=" ".join)
def test_json_wherever_a_command_has_a_result(words):
    assert "json" in _dests(words)


@pytest.fixture()
def recording(tmp_path) -> Path:
    writer = EpisodeRecording.create_at(tmp_path / "rec", Manifest.build(RunConfig()))
    writer.close()
    return writer.dir


def test_timeline_json_parses(tmp_path, recording):
    from tests.test_timeline import synthetic_events

    writer = EpisodeRecording.create_at(tmp_path / "synthetic", Manifest.build(RunConfig()))
    for event in synthetic_events():
        writer.events.write(event)
    writer.close()
    proc = run_cli("timeline", writer.dir, "-o", tmp_path / "t.png", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["path"] == str(tmp_path / "t.png")


# 5. -q / -v through logging ----------------------------------------------------------------------------------------

SCRIPTED = ("episode", "--policy", "scripted", "--max-tics", "20", "--no-record", "--json")


def test_quiet_prints_no_info_and_verbose_prints_debug_before_or_after_the_command():
    normal = run_cli(*SCRIPTED, cwd=REPO)
    assert normal.returncode == 0 and "[1/1] 20 tics" in normal.stderr, normal.stderr
    for quiet in (run_cli(*SCRIPTED, "-q", cwd=REPO), run_cli("-q", *SCRIPTED, cwd=REPO)):
        assert quiet.returncode == 0 and quiet.stderr == "" and json.loads(quiet.stdout)["tics"] == 20
    verbose = run_cli("-v", *SCRIPTED, cwd=REPO)
    assert verbose.returncode == 0 and "agent-runtime episode: {" in verbose.stderr
    assert "agent-runtime episode: {" not in normal.stderr


# 6. progress bars with an ETA --------------------------------------------------------------------------------------

class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _on_a_terminal(*args: str) -> str:
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(list(args)) == 0
    return err.getvalue()


@pytest.mark.parametrize("name, words", [
    ("episodes", ["episode", "--policy", "scripted", "--no-record", "--episodes", "2"]),
    ("collect", ["collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "2"]),
    ("play", ["bench", "play", "--model", "tiny:llama", "--agents", "scripted", "--episodes", "2", "--threads", "1"]),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_bar_with_an_eta_on_a_terminal_and_none_with_quiet(tmp_path, name, words):
    args = [*words, "--max-tics", "20"] + (["--out", str(tmp_path / "out")] if words[0] != "episode" else [])
    shown = _on_a_terminal(*args)
    assert f"{name}: 100%" in shown and "2/2 [" in shown and "<" in shown.split("2/2 [")[-1], shown
    assert f"{name}:" not in _on_a_terminal(*args, "-q")


# 7. a bad output location: one line, exit 2, before the work -------------------------------------------------------

def _refused(proc, words: str, t0: float, seconds: float = 15.0) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr
    assert "loading model" not in proc.stderr and "machine:" not in proc.stderr and proc.stdout == ""
    assert time.monotonic() - t0 < seconds  # no model loaded, no episode played


@pytest.mark.parametrize("words", [
    ["episode", "--policy", "llm", "--model", "tiny:llama", "--out"],
    ["collect", "--model", "tiny:llama", "--episodes", "1", "--out"],
    ["live", "--model", "tiny:llama", "--seconds", "1", "--out"],
    *(["bench", name, "--model", "tiny:llama", "--out"] for name in ("kv", "play", "reaction", "memory", "soak")),
    ["bench", "interrupt", "--out"],
], ids=lambda words: " ".join(words[:2]))
def test_an_output_that_is_a_file_is_refused_before_the_work(tmp_path, words):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("keep me")
    t0 = time.monotonic()
    _refused(run_cli(*words, in_the_way, cwd=REPO), str(in_the_way), t0)
    assert in_the_way.read_text() == "keep me"


def test_collect_refuses_the_current_directory_and_a_folder_of_other_files(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    collect = ("collect", "--model", "tiny:llama", "--episodes", "1", "--out")
    t0 = time.monotonic()
    _refused(run_cli(*collect, mine), "is not a data set", t0)
    _refused(run_cli(*collect, ".", cwd=mine), "not the current or the root directory", t0)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_file_outputs_are_checked_before_the_recording_is_read(tmp_path, recording):
    t0 = time.monotonic()
    _refused(run_cli("replay", tmp_path / "no-such-recording", "--video", tmp_path / "no" / "v.mp4"),
             "cannot write --video", t0)
    _refused(run_cli("timeline", tmp_path / "no-such-recording", "-o", tmp_path / "no" / "t.png"),
             "cannot write -o", t0)
    (tmp_path / "dir.png").mkdir()
    _refused(run_cli("timeline", recording, "-o", tmp_path / "dir.png"), "it is a directory", t0)
    _refused(run_cli("bench", "soak", "--minutes", "1", "--out", tmp_path / "o", "--json", tmp_path),
             "it is a directory", t0)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
