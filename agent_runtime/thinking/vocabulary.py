"""The words of notes and remarks: a small fixed vocabulary in which every phrase is one claim a judge can check.

A text is phrases joined by ", " (a leading "note: " is read past). The phrases:

    "2 imps left"            on screen: that many of that kind on that side ("ahead": under AHEAD_DEGREES off the
                             crosshair; "left"/"right": the rest of that half of the screen)
    "nothing in view"        no object on screen
    "lost imp behind left"   one of that kind off screen on that side (remembered: what one frame can't show)
    "turning left", "firing", "waiting", ...   the command under way (DOING)
    "14 rounds"              the ammo
    "hp 80"                  the health

Anything else is no claim: judged apart, as noise. Counts are digits and names the frame line's short names with an
"s" for more than one, so the text a model reads (the frame line) and the text it writes share their tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envs.observation_text import AHEAD_DEGREES

NOTE_PREFIX = "note: "
SEEN_SIDES = ("left", "ahead", "right")
LOST_SIDES = ("behind left", "behind right")
DOING = {  # button name -> the words for it under way
    "TURN_LEFT": "turning left", "TURN_RIGHT": "turning right", "ATTACK": "firing", "MOVE_FORWARD": "moving forward",
    "MOVE_BACKWARD": "moving back", "MOVE_LEFT": "strafing left", "MOVE_RIGHT": "strafing right", "NOOP": "waiting",
}
NOTHING = "nothing in view"

_COUNTED = re.compile(rf"(?P<count>\d+) (?P<name>[a-z][a-z ]*?) (?P<side>{'|'.join(SEEN_SIDES)})")
_LOST = re.compile(rf"lost (?P<name>[a-z][a-z ]*?) (?P<side>{'|'.join(LOST_SIDES)})")
_AMMO = re.compile(r"(?P<value>\d+) rounds")
_HEALTH = re.compile(r"hp (?P<value>\d+)")


@dataclass(frozen=True)
class Claim:
    """One phrase's meaning. kind: seen | nothing | lost | doing | ammo | health."""

    kind: str
    name: str | None = None  # the object's short name (singular), seen and lost
    side: str | None = None  # SEEN_SIDES or LOST_SIDES
    count: int | None = None  # seen
    value: int | str | None = None  # ammo and health: the number; doing: the button name

    def text(self) -> str:
        """The phrase that says it (parse_claims(claim.text()) gives the claim back)."""
        if self.kind == "seen":
            return f"{self.count} {plural(self.name, self.count)} {self.side}"
        if self.kind == "lost":
            return f"lost {self.name} {self.side}"
        if self.kind == "doing":
            return DOING[self.value]
        if self.kind == "ammo":
            return f"{self.value} rounds"
        if self.kind == "health":
            return f"hp {self.value}"
        return NOTHING


def plural(name: str, count: int) -> str:
    return name if count == 1 else f"{name}s"


def singular(words: str, count: int) -> str:
    return words[:-1] if count != 1 and words.endswith("s") else words


def seen_side(bearing: float) -> str:
    """An on-screen object's side word for its bearing (degrees, positive = left)."""
    if abs(bearing) < AHEAD_DEGREES:
        return "ahead"
    return "left" if bearing > 0 else "right"


def lost_side(bearing: float) -> str:
    return "behind left" if bearing > 0 else "behind right"


def join(claims: list[Claim]) -> str:
    """The text of these claims, in their order."""
    return ", ".join(c.text() for c in claims)


_DOING_WORDS = {words: name for name, words in DOING.items()}


def parse_phrase(phrase: str) -> Claim | None:
    """The claim a phrase makes, or None where it makes none (a model's noise, another wording)."""
    phrase = phrase.strip().lower().rstrip(".!?")
    if phrase == NOTHING:
        return Claim("nothing")
    if phrase in _DOING_WORDS:
        return Claim("doing", value=_DOING_WORDS[phrase])
    for pattern, kind in ((_AMMO, "ammo"), (_HEALTH, "health")):
        m = pattern.fullmatch(phrase)
        if m:
            return Claim(kind, value=int(m["value"]))
    m = _LOST.fullmatch(phrase)
    if m:
        return Claim("lost", name=m["name"], side=m["side"])
    m = _COUNTED.fullmatch(phrase)
    if m and int(m["count"]) > 0:
        count = int(m["count"])
        return Claim("seen", name=singular(m["name"], count), side=m["side"], count=count)
    return None


def parse_claims(text: str) -> tuple[list[Claim], int]:
    """The claims of a note or remark, and how many of its phrases claimed nothing."""
    text = text.strip()
    text = text[len(NOTE_PREFIX):] if text.lower().startswith(NOTE_PREFIX) else text
    phrases = [p for p in re.split(r"[,;]", text) if p.strip()]
    claims = [parse_phrase(p) for p in phrases]
    return [c for c in claims if c is not None], sum(c is None for c in claims)
