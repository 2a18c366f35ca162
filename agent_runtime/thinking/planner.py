"""The planner labeller: the note a Thinker should write, decided only from what the Thinker's view holds.

Its view holds the last few frame lines, the status line and its own previous note, never the engine's hidden state,
so a model reading the same view can learn to write the same note. The note keeps what the newest frame can't show:
a monster (or pickup) last seen near an edge and gone since is "lost ... behind left/right" until a frame shows
that kind again (the previous note carries it on after its frames have left the view), beside what is on screen now
and the rounds left: "1 imp ahead, lost demon behind right, 14 rounds" (after the Thinker's prompt, "Thought:").
Effects (blood, puffs, fireballs) are never lost: they vanish.
"""

from __future__ import annotations

from envs.observation_text import SHORT_NAMES, parse_seen

from agent_runtime.thinking.describer import ammo_claims, seen_claims
from agent_runtime.thinking.vocabulary import Claim, join, lost_side, parse_claims

EDGE_DEGREES = 25.0  # an object last seen at least this far off the crosshair left by the screen's edge
MAX_LOST = 2  # the note names at most this many lost monsters, the most recently lost first
LASTING = frozenset(SHORT_NAMES.values()) - {"fireball"}  # kinds that stay where they went


def note_for(frame_lines: list[str], status_line: str | None, previous_note: str | None) -> str:
    """frame_lines: the Thinker's view's frame lines, oldest first (at least one)."""
    newest = parse_seen(frame_lines[-1])
    on_screen = {name for name, _, _ in newest}
    lost: list[Claim] = []

    def remember(claim: Claim) -> None:
        if claim.name in LASTING and claim.name not in on_screen and claim not in lost:
            lost.append(claim)

    sighted: set[str] = set()
    for line in reversed(frame_lines[:-1]):  # each kind where it was seen last (the most recently seen first)
        objects = parse_seen(line)
        for name, bearing, _ in objects:
            if name not in sighted and abs(bearing) >= EDGE_DEGREES:
                remember(Claim("lost", name=name, side=lost_side(bearing)))
        sighted |= {name for name, _, _ in objects}
    for claim in parse_claims(previous_note or "")[0]:
        if claim.kind == "lost":
            remember(claim)
    return join(seen_claims(frame_lines[-1]) + lost[:MAX_LOST] + ammo_claims(status_line))
