"""The judge: is a claim true of the game at the tic it was written? Against the engine's own state (the label
buffer, every object's position, the variables and the command under way), which no view holds."""

from __future__ import annotations

from envs.frame import Frame
from envs.observation_text import bearing_degrees, short_name, visible_objects

from agent_runtime.thinking.vocabulary import Claim, lost_side, seen_side


def holds(claim: Claim, frame: Frame, doing: str | None = None) -> bool | None:
    """True or false of `frame`; None where the game's state cannot tell (a lost monster without the engine's
    objects info, the command under way unknown). doing: the button name under way at the frame (NOOP: none)."""
    on_screen = visible_objects(frame)
    if claim.kind == "nothing":
        return not on_screen
    if claim.kind == "seen":
        return claim.count == sum(1 for o in on_screen if short_name(o.name) == claim.name
                                  and seen_side(bearing_degrees(frame, o)) == claim.side)
    if claim.kind == "lost":
        if not frame.objects:
            return None
        shown = {o.object_id for o in frame.labels}
        return any(o.object_id not in shown and o.category != "Self" and short_name(o.name) == claim.name
                   and lost_side(bearing_degrees(frame, o)) == claim.side for o in frame.objects)
    if claim.kind == "doing":
        return None if doing is None else doing == claim.value
    if claim.kind == "ammo":
        return round(frame.ammo) == claim.value
    if claim.kind == "health":
        return round(frame.health) == claim.value
    raise ValueError(f"unknown claim kind {claim.kind!r}")
