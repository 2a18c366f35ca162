"""One-line notices for the user while a session runs (a device lost, a text cut): on stderr through `logging`
(-q: warnings only; -v: debug too), never a traceback, above any tqdm progress bar.

Notices that repeat with their cause are said once a session (OncePerKind); each occurrence stays an event.
"""

import logging
import sys
from typing import Callable

from tqdm import tqdm

Notify = Callable[[str], None]
log = logging.getLogger("agent_runtime")
stderr_line: Notify = log.info  # a status line: -q hides it
warning_line: Notify = log.warning  # -q shows it: something failed, was cut or is not what was asked


class _Stderr(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:  # to sys.stderr as it is now (a redirect may swap it)
        tqdm.write(self.format(record), file=sys.stderr)


log.addHandler(_Stderr())  # the lines as they are, also where the runtime is used as a library
log.propagate = False
log.setLevel(logging.INFO)  # the CLI's -q / -v set it per command


def progress_bar(total: float, desc: str, unit: str) -> tqdm:
    """A bar with its ETA on stderr: on a terminal and without -q (elsewhere the command's lines tell the progress)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=1.0,
                disable=not (sys.stderr.isatty() and log.isEnabledFor(logging.INFO)))


class OncePerKind:
    """Says each kind of notice once: a flood must not become a flood of lines."""

    def __init__(self, notify: Notify | None):
        self.notify = notify
        self.said: set[str] = set()

    def __call__(self, kind: str, line: str) -> None:
        if self.notify is not None and kind not in self.said:
            self.said.add(kind)
            self.notify(line)
