"""`agent-runtime ARGS` run in this process: what a subprocess gives (exit code, stdout, stderr) without the ~4 s
of a fresh interpreter importing torch. Tests of exit codes on signals, crashes and fresh installs keep a subprocess."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess

import torch

from agent_runtime.cli import main


def run_cli(*args: str, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """CompletedProcess(args, returncode, stdout, stderr) of the command; torch's thread count and the working
    directory are restored afterwards."""
    threads, here = torch.get_num_threads(), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse: a usage error (2) or --help / --version (0)
                code = e.code if isinstance(e.code, int) else 1
    finally:
        torch.set_num_threads(threads)
        os.chdir(here)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
