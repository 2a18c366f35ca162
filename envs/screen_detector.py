"""From the screen alone, the objects a frame line names: class, bearing and distance band.

Doom's bearing is horizontal, so the network reads the screen in columns: convolutions, then each column pooled
over its height, then per column and distance band which classes have an object centred there, and where inside
the column the nearest in that band is. A class and band per output (not one band per column) lets a column hold
a near and a far medikit at once, and makes the band the class's own decision. Its targets come from the label
buffer every ViZDoom screen comes with (`targets_from_frame`); once trained, play needs no labels. Small on purpose
(one forward per frame, channels-last: ~2 ms for a 160x120 screen on 2 cores): every millisecond of it is
reaction time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from envs.frame import Frame
from envs.observation_text import (bearing_degrees, distance_band, distance_units, object_words, short_name,
                                   visible_objects)

# what the frame line names in ViZDoom's shipped scenarios (its short names, seen in random play on defend_the_center,
# basic, health_gathering, defend_the_line and deadly_corridor); an object of another class is not detected
CLASSES = ("marine", "demon", "imp", "cacodemon", "zombieman", "shotgunner", "chaingunner", "lost soul", "medikit",
           "armor", "stimpack", "shotgun", "fireball", "bullet puff", "blood", "dead cacodemon", "dead zombieman",
           "dead shotgun guy")
BANDS = ("near", "mid", "far")
COLUMNS = 40  # 4 pixels of the runtime's 160-wide screen each: ~2.3 degrees at the centre, refined by an offset
FIELD_OF_VIEW = 90.0  # ViZDoom's default horizontal field of view, degrees
SCORE_THRESHOLD = 0.5


def bearing_from_screen_x(x: float, width: int, fov: float = FIELD_OF_VIEW) -> float:
    """Degrees from the view direction to a point at screen column x (pixels from the left edge), positive = left,
    as observation_text.bearing_degrees measures it from world positions: a perspective projection's inverse."""
    half = width / 2.0
    return -math.degrees(math.atan((x - half) / half * math.tan(math.radians(fov / 2.0))))


def screen_x_from_bearing(bearing: float, width: int, fov: float = FIELD_OF_VIEW) -> float:
    """The inverse of bearing_from_screen_x: the screen column at which a bearing appears."""
    half = width / 2.0
    return half - half * math.tan(math.radians(bearing)) / math.tan(math.radians(fov / 2.0))


@dataclass(frozen=True)
class Detection:
    """One object seen on the screen, as the frame line describes it."""

    name: str
    bearing: float  # degrees, positive = left
    band: str  # near / mid / far
    score: float

    def describe(self) -> str:
        """The frame line's words for it ("imp left 23 mid")."""
        return object_words(self.name, self.bearing, self.band)


@dataclass
class Targets:
    """What the detector should say about one screen, per distance band and column (B = len(BANDS), K = COLUMNS)."""

    present: np.ndarray  # [classes, B, K] 1.0 where an object of that class and band is centred in the column
    offset: np.ndarray  # [B, K] where in its column the band's nearest centre is, 0..1 (meaningful where present)

    @staticmethod
    def stack(items: list[Targets]) -> dict[str, torch.Tensor]:
        return {"present": torch.from_numpy(np.stack([t.present for t in items])),
                "offset": torch.from_numpy(np.stack([t.offset for t in items]))}


def targets_from_frame(frame: Frame, width: int, classes: tuple[str, ...] = CLASSES,
                       columns: int = COLUMNS) -> Targets:
    """The label buffer's objects on screen as column targets: centre column from the object's world bearing (the
    frame line's own bearing, so a perfect detector reproduces its text), band from its world distance."""
    return targets_from_objects([(short_name(o.name), bearing_degrees(frame, o), distance_units(frame, o))
                                 for o in visible_objects(frame)], width, classes, columns)


def targets_from_objects(objects, width: int, classes: tuple[str, ...] = CLASSES, columns: int = COLUMNS) -> Targets:
    """objects: (short name, bearing in degrees, distance in map units) of each object on the screen. A column holds
    one object of each class and band (blood in front of an imp is both); its offset in a band is its nearest's."""
    present = np.zeros((len(classes), len(BANDS), columns), np.float32)
    offset = np.zeros((len(BANDS), columns), np.float32)
    nearest = np.full((len(BANDS), columns), np.inf)
    for name, bearing, units in objects:
        if name not in classes:
            continue
        x = screen_x_from_bearing(bearing, width) / width * columns
        column = min(columns - 1, max(0, int(x)))
        band = BANDS.index(distance_band(units))
        present[classes.index(name), band, column] = 1.0
        if units < nearest[band, column]:
            nearest[band, column] = units
            offset[band, column] = min(1.0, max(0.0, x - column))
    return Targets(present, offset)


class ScreenDetector(nn.Module):
    """Screens (uint8, [N, H, W, 3] as ViZDoom's RGB24 gives them) in; per column: a logit per class and band, then
    an offset logit per band out ([N, classes * B + B, COLUMNS], B = len(BANDS))."""

    def __init__(self, classes: tuple[str, ...] = CLASSES, columns: int = COLUMNS, channels: int = 64):
        super().__init__()
        self.classes, self.columns, self.channels = tuple(classes), columns, channels
        self.features = nn.Sequential(  # the screen and where each pixel is: height on the screen tells distance
            nn.Conv2d(3 + 2, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, channels, 3, stride=(2, 1), padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.across = nn.Sequential(  # neighbouring columns, near and a little farther
            nn.Conv1d(channels, channels, 3, padding=1), nn.ReLU(),
            nn.Conv1d(channels, channels, 3, padding=2, dilation=2), nn.ReLU())
        self.head = nn.Conv1d(channels, (len(self.classes) + 1) * len(BANDS), 1)
        self.to(memory_format=torch.channels_last)

    def forward(self, screens: torch.Tensor) -> torch.Tensor:
        n, height, width, _ = screens.shape
        ys = torch.linspace(-1.0, 1.0, height).view(1, 1, height, 1).expand(n, 1, height, width)
        xs = torch.linspace(-1.0, 1.0, width).view(1, 1, 1, width).expand(n, 1, height, width)
        x = torch.cat([screens.permute(0, 3, 1, 2).float().div(255.0), ys, xs], dim=1)
        x = x.contiguous(memory_format=torch.channels_last)
        x = self.features(x).amax(dim=2)  # [N, channels, W / 4]: each column pooled over the screen's height
        if x.shape[-1] != self.columns:
            x = F.adaptive_max_pool1d(x, self.columns)
        return self.head(self.across(x))


def detector_loss(output: torch.Tensor, targets: dict[str, torch.Tensor], *, present_weight: float = 8.0,
                  offset_weight: float = 4.0) -> torch.Tensor:
    """Presence per class and band (binary cross-entropy summed over the bands, so a class weighs what it would
    with one output a column; objects weighted up: most columns are empty) and the offset (L1 where a band has an
    object, weighted up: a quarter column is a degree, and the side of an object near the crosshair hangs on it)."""
    n, n_classes, n_bands, columns = targets["present"].shape
    present_logits, offset_logits = output.split([n_classes * n_bands, n_bands], dim=1)
    present = targets["present"].reshape(n, n_classes * n_bands, columns)
    weight = 1.0 + (present_weight - 1.0) * present
    loss = n_bands * F.binary_cross_entropy_with_logits(present_logits, present, weight=weight)
    has_object = targets["present"].amax(dim=1) > 0  # [N, B, K]
    if has_object.any():
        loss = loss + offset_weight * (torch.sigmoid(offset_logits) - targets["offset"]).abs()[has_object].mean()
    return loss


def decode(output: torch.Tensor, width: int, classes: tuple[str, ...] = CLASSES,
           threshold: float = SCORE_THRESHOLD) -> list[list[Detection]]:
    """Each screen's detections, nearest band first, then by score: per class and band, a column that scores over
    `threshold` and at least as high as its neighbours (one object spread over two columns is one detection)."""
    n, n_classes, n_bands, columns = output.shape[0], len(classes), len(BANDS), output.shape[-1]
    flat = torch.sigmoid(output[:, :n_classes * n_bands]).detach()  # [N, C * B, K]
    scores = flat.view(n, n_classes, n_bands, columns)
    offsets = torch.sigmoid(output[:, n_classes * n_bands:]).detach()  # [N, B, K]
    neighbours = F.max_pool1d(flat, 3, stride=1, padding=1).view_as(scores)
    found = [[] for _ in range(n)]
    for i, c, b, k in torch.nonzero((scores > threshold) & (scores >= neighbours)).tolist():
        x = (k + float(offsets[i, b, k])) / columns * width
        found[i].append(Detection(classes[c], bearing_from_screen_x(x, width), BANDS[b], float(scores[i, c, b, k])))
    return [sorted(d, key=lambda d: (BANDS.index(d.band), -d.score)) for d in found]
