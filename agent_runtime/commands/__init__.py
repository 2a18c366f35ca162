"""Subcommands of `agent-runtime`: each module has add_arguments(parser) and run(args) -> exit code."""

import argparse
import logging
import tempfile
from pathlib import Path

from agent_runtime.errors import UserError

# Options that mean the same in every command that has them: add_options(p, flag, ...) adds them.
OPTIONS = {
    "--model": dict(help="model: a safetensors directory (a causal LM, or an Idefics3/SmolVLM or LLaVA-style "
                         "vision-language model), a .gguf file, tiny:llama, tiny:smolvlm, tiny:llava or a Hugging "
                         "Face id (OWNER/NAME) already in the local Hugging Face cache, never downloaded (default: "
                         "the config's, else the embedded SmolLM2-135M-Instruct)"),
    "--adapter": dict(help="LoRA adapter from `agent-runtime train`, merged at load (default: the config's "
                           "model.adapter, the shipped one; `none`: the untrained model)"),
    "--no-think-adapter": dict(metavar="ADAPTER", help="the adapter the no_think baseline plays with (default: the "
                               "config's model.no_think_adapter: the shipped adapter's read-act twin where one is "
                               "shipped, else the multi-stream agent's; `none`: the untrained model)"),
    "--no-record": dict(action="store_true", help="write no recording"),
    "--scenario": dict(help="scenario name or .cfg (default: the config's)"),
    "--seed": dict(type=int, help="episode i plays seed SEED + i (default: the config's)"),
    "--config": dict(help="YAML run config, the base that the flags given override (default configs/default.yaml)"),
    "--threads": dict(type=int, help="torch threads (default: the config's, else the cores actually free)"),
    "--dtype": dict(choices=("auto", "bfloat16", "float32"), help="model precision (default: the config's)"),
    "--max-tics": dict(type=int, help="stop each episode after this many tics"),
    "--fixed-cost": dict(action="store_true", help="charge each engine step a fixed cost per token instead of its "
                                                   "measured compute time (deterministic)"),
    "--device": dict(default="cpu", choices=("cpu", "cuda"), help="where the model runs (default cpu)"),
    "--barge-in": dict(choices=("pause_confirm", "half_duplex", "immediate"), help="what user speech does while the "
                       "agent talks: pause_confirm (open speakers), half_duplex, immediate (default: the config's)"),
    "--command-pause-ms": dict(type=int, metavar="MS", help="quiet after a whole voice command phrase that acts on it "
                               "before the end-of-speech window; 0: only at the end of speech (default: the config's)"),
    "--frame-source": dict(choices=("labels", "pixels"), help="where frame lines come from: labels (the engine's "
                           "label buffer) or pixels (the screen, by the shipped screen detector; with a "
                           "vision-language model also its image tokens) (default: the config's)"),
    "--json": dict(action="store_true", help="print the result as JSON on stdout, nothing else"),
}
MODEL_OPTIONS = ("--model", "--adapter", "--dtype", "--threads", "--device")  # where a command loads a model
AGENT_ALIASES = {"multi_stream": "llm", "multi_stream_untrained": "llm_untrained"}

# -v / -q: a parent of every parser, so they work before and after a command's name (unset: info lines)
VERBOSITY = argparse.ArgumentParser(add_help=False)
VERBOSITY.add_argument("-v", "--verbose", dest="log_level", action="store_const", const=logging.DEBUG,
                       default=argparse.SUPPRESS, help="also print debug lines on stderr")
VERBOSITY.add_argument("-q", "--quiet", dest="log_level", action="store_const", const=logging.WARNING,
                       default=argparse.SUPPRESS, help="only warnings and errors on stderr, no progress bar")


def add_options(p, *flags: str) -> None:
    """The shared OPTIONS named by `flags`, so a flag's default and help cannot drift between commands."""
    for flag in flags:
        p.add_argument(flag, **OPTIONS[flag])


def agent_name(text: str) -> str:
    return AGENT_ALIASES.get(text, text)  # `bench play --agents multi_stream` is `episode --policy llm`


def add_on_disk_full(p, run: str) -> None:
    """--on-disk-full for a command whose `run` ("run", "session") records."""
    p.add_argument("--on-disk-full", choices=("continue", "stop"), default="continue",
                   help=f"when a recording cannot be written mid-{run} (a full or unwritable disk; one line says so "
                        "and what was written stays readable): continue = play on without recording (default); "
                        f"stop = end the {run} cleanly after the current step, exit code 1")


def require_cuda(device: str) -> None:
    """--device cuda on a machine without one is a UserError before the model loads."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: no CUDA device is available here; use --device cpu")


def at_least(args, minimum: int, *flags: str) -> None:
    """A value of one of `flags` below `minimum` is a UserError (an optional flag left unset passes)."""
    for flag in flags:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value < minimum:
            raise UserError(f"{flag} must be at least {minimum} (got {value})")


def own_dir(path_text: str, flag: str, files: frozenset[str], first: str, what: str) -> Path:
    """A directory a command writes, resumes or replaces: new, empty or holding only `files` (what it writes there,
    `first` among them), not the current or the root directory: it cannot touch what it did not write."""
    out = Path(path_text).expanduser()
    resolved = out.resolve()
    if resolved == Path.cwd().resolve() or resolved == resolved.parent:
        raise UserError(f"{flag} {path_text}: name a new directory (e.g. {flag} runs/mine), not the current or the "
                        "root directory")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError(f"{flag} {path_text} exists and is not a directory; name a new directory")
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if held and (set(held) - files or first not in held):
        raise UserError(f"{flag} {path_text} exists and is not {what} (it holds {', '.join(held[:3])}); name a new "
                        "directory")
    writable_dir(path_text if out.is_dir() else str(out.parent), flag)
    return out


def output_file(path_text: str, flag: str) -> Path:
    """A file a command writes at its end, checked before the work: not a directory, in a writable directory."""
    path = Path(path_text).expanduser()
    if path.is_dir() or not path.parent.is_dir():
        raise UserError(f"cannot write {flag} {path}: " + ("it is a directory" if path.is_dir() else
                                                             f"{path.parent} is not a directory"))
    writable_dir(str(path.parent), flag)
    return path


def writable_dir(path_text: str, what: str) -> Path:
    """Create DIR and prove it is writable before any work runs, so no result is lost at the end."""
    path = Path(path_text).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path, prefix=".probe-").close()  # deleted on close
    except OSError as e:
        raise UserError(f"cannot write to {what} {path}: {e.strerror or e}") from None
    return path
