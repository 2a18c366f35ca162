"""Compact text for a language model: own status plus the nearest objects, with side, bearing and distance.

Example: "hp 100 ammo 26 | imp left 23 mid; zombieman ahead 2 near"

Every token of it is reaction time (the tokenizer spends one token per digit), so it says only what a
decision needs: health, ammo, and per object its side, bearing in whole degrees and a distance band.
Bearing is the angle from the view direction to the object, positive = to the LEFT (Doom angles grow
counter-clockwise); the text writes its magnitude after the side word ("ahead" near 0: see describe_object).
Distance bands: near (at most NEAR_UNITS map units; a player is 32 wide), mid (at most MID_UNITS), far. Only objects on screen are
listed unless privileged=True, which adds off-screen objects from the objects info (never the agent's
default).
"""

from __future__ import annotations

import math
import re

from envs.frame import Frame, ObjectLabel

MAX_OBJECTS = 4
AHEAD_DEGREES = 5.0  # |bearing| below this reads "ahead"
NEAR_UNITS = 256.0  # within reach of a melee monster in a few tics
MID_UNITS = 640.0
SKIPPED_CATEGORIES = frozenset({"Self"})  # the own player/weapon

# Short names for the common actors; anything else is its CamelCase name split into lowercase words.
SHORT_NAMES = {
    "DoomImp": "imp",
    "MarineChainsawVzd": "marine",
    "ShotgunGuy": "shotgunner",
    "ChaingunGuy": "chaingunner",
    "Zombieman": "zombieman",
    "Demon": "demon",
    "Spectre": "spectre",
    "Cacodemon": "cacodemon",
    "LostSoul": "lost soul",
    "GreenArmor": "armor",
    "BlueArmor": "armor",
    "Medikit": "medikit",
    "Stimpack": "stimpack",
    "DoomImpBall": "fireball",
}


def short_name(name: str) -> str:
    if name in SHORT_NAMES:
        return SHORT_NAMES[name]
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", re.sub(r"Vzd$", "", name))
    return " ".join(w.lower() for w in words) or name.lower()


def bearing_degrees(frame: Frame, obj: ObjectLabel, turned: float = 0.0) -> float:
    """Angle from the view direction to obj, in (-180, 180], positive = left; `turned`: degrees (positive = left)
    the view turns after the frame, so the angle is the one the object will have once that turn is done."""
    v = frame.variables
    dx, dy = obj.x - v.get("POSITION_X", 0.0), obj.y - v.get("POSITION_Y", 0.0)
    rel = math.degrees(math.atan2(dy, dx)) - v.get("ANGLE", 0.0) - turned
    rel = (rel + 180.0) % 360.0 - 180.0
    return 180.0 if rel == -180.0 else rel


def distance_units(frame: Frame, obj: ObjectLabel) -> float:
    v = frame.variables
    return math.hypot(obj.x - v.get("POSITION_X", 0.0), obj.y - v.get("POSITION_Y", 0.0))


def visible_objects(frame: Frame, *, privileged: bool = False, aim_order: bool = False,
                    turned: float = 0.0) -> list[ObjectLabel]:
    """Objects worth describing (no Self), nearest first; off-screen ones only when privileged. aim_order: the order
    an aimer takes them in instead: near ones first, then by whole degrees from the crosshair (after `turned`)."""
    chosen: dict[int, ObjectLabel] = {}
    pool = frame.labels + (frame.objects if privileged else ())
    for obj in pool:
        if obj.category not in SKIPPED_CATEGORIES and obj.object_id not in chosen:
            chosen[obj.object_id] = obj

    def key(o):
        units = distance_units(frame, o)
        if aim_order:
            return (*aim_rank(distance_band(units), bearing_degrees(frame, o, turned)), round(units), o.name,
                    o.object_id)
        return (round(units), o.name, o.object_id)
    return sorted(chosen.values(), key=key)


def aim_rank(band: str, bearing: float) -> tuple[bool, int]:
    """The order an aimer takes objects in (sort by it): near ones first, then by whole degrees from the crosshair."""
    return band != "near", round(abs(bearing))


def distance_band(units: float) -> str:
    return "near" if units <= NEAR_UNITS else ("mid" if units <= MID_UNITS else "far")


def describe_object(frame: Frame, obj: ObjectLabel, *, signed: bool = False, turned: float = 0.0) -> str:
    """signed: the side word always says the sign ("left 3"; "ahead" only at 0), which aiming within a few degrees
    needs; else any |bearing| below AHEAD_DEGREES reads "ahead". turned: see bearing_degrees."""
    return object_words(short_name(obj.name), bearing_degrees(frame, obj, turned),
                        distance_band(distance_units(frame, obj)), signed=signed)


def object_words(name: str, bearing: float, band: str, *, signed: bool = False) -> str:
    """"imp left 23 mid": an object's words from its name, bearing (degrees, positive = left) and distance band,
    however they were found (the label buffer, or envs/screen_detector.py from the screen)."""
    ahead = round(abs(bearing)) == 0 if signed else abs(bearing) < AHEAD_DEGREES
    side = "ahead" if ahead else ("left" if bearing > 0 else "right")
    return f"{name} {side} {abs(bearing):.0f} {band}"


_OBJECT_WORDS = re.compile(r"(?P<name>[a-z][a-z ]*?) (?P<side>left|right|ahead) (?P<deg>\d+) (?P<band>near|mid|far)")


def parse_seen(line: str) -> list[tuple[str, float, str]]:
    """A frame line's objects back from its words, as (name, bearing, band), bearing positive = left: what a reader
    of the line knows, no more (encode_seen's inverse, to the degree it writes)."""
    line = line.strip()
    if "|" in line:
        line = line.split("|", 1)[1].strip()
    out = []
    for words in line.split(";"):
        m = _OBJECT_WORDS.fullmatch(words.strip())
        if m:
            degrees = float(m["deg"])
            out.append((m["name"], -degrees if m["side"] == "right" else degrees, m["band"]))
    return out


def encode_status(frame: Frame) -> str:
    """Own status: "hp H ammo A" (changes rarely: a reader may keep it apart from what it sees)."""
    return f"hp {frame.health:.0f} ammo {frame.ammo:.0f}"


def encode_seen(frame: Frame, *, privileged: bool = False, max_objects: int = MAX_OBJECTS, signed: bool = False,
                aim_order: bool = False, turned: float = 0.0) -> str:
    """What is in view: "obj side deg band; ..." nearest first (or in aim_order), or "nothing in view"."""
    objects = visible_objects(frame, privileged=privileged, aim_order=aim_order, turned=turned)[:max_objects]
    if not objects:
        return "nothing in view"
    return "; ".join(describe_object(frame, o, signed=signed, turned=turned) for o in objects)


def encode_observation(frame: Frame, *, privileged: bool = False, max_objects: int = MAX_OBJECTS,
                       signed: bool = False, aim_order: bool = False, turned: float = 0.0) -> str:
    """One line: "hp H ammo A | obj side deg band; ..." (or "| nothing in view")."""
    seen = encode_seen(frame, privileged=privileged, max_objects=max_objects, signed=signed, aim_order=aim_order,
                       turned=turned)
    return f"{encode_status(frame)} | {seen}"
