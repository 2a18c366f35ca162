"""One-line notices for the user while a session runs (a device lost, a text cut): on stderr, never a traceback.

Notices that repeat with their cause are said once a session (OncePerKind); each occurrence stays an event.
"""

from __future__ import annotations

import sys
from typing import Callable

Notify = Callable[[str], None]


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class OncePerKind:
    """Says each kind of notice once: a flood must not become a flood of lines."""

    def __init__(self, notify: Notify | None):
        self.notify = notify
        self.said: set[str] = set()

    def __call__(self, kind: str, line: str) -> None:
        if self.notify is not None and kind not in self.said:
            self.said.add(kind)
            self.notify(line)
