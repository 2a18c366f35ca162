"""The describer: the remark a commentary stream should say, from what its view holds.

It reads the newest frame line, the status line and the command under way, and says them in the fixed vocabulary
("2 imps left, turning left, 14 rounds."), so every word of a remark is a claim that was true when it was written.
It is the teacher the commentary stream learns from; `bench words` judges both.
"""

from __future__ import annotations

import re

from envs.observation_text import parse_seen

from agent_runtime.thinking.vocabulary import DOING, SEEN_SIDES, Claim, join, seen_side

_AMMO = re.compile(r"ammo (\d+)")


def seen_claims(frame_line: str) -> list[Claim]:
    """What a frame line shows as counts per kind and side (left, ahead, right; kinds in the line's order), or
    "nothing in view"."""
    counts: dict[tuple[str, str], int] = {}
    for name, bearing, _band in parse_seen(frame_line):
        key = (name, seen_side(bearing))
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts, key=lambda k: SEEN_SIDES.index(k[1]))  # stable: kinds keep the line's order per side
    return [Claim("seen", name=n, side=s, count=counts[(n, s)]) for n, s in ordered] or [Claim("nothing")]


def ammo_claims(status_line: str | None) -> list[Claim]:
    m = _AMMO.search(status_line or "")
    return [Claim("ammo", value=int(m[1]))] if m else []


def describe(frame_line: str, status_line: str | None, doing: str | None) -> str:
    """doing: the button name under way (NOOP: waiting; None or a button without words: not said)."""
    claims = seen_claims(frame_line)
    if doing in DOING:
        claims.append(Claim("doing", value=doing))
    return join(claims + ammo_claims(status_line)) + "."
