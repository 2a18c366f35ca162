"""A swimlane PNG of a stretch of a recording: who did what when, readable at a glance like a protocol trace.

One lane per actor; generation bumps cut across all lanes, since each fences what the old generation had in
flight. x = session seconds: sim_ms where the event has it, else t_mono carried on from the last one that had.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_runtime.errors import UserError
from agent_runtime.session.events import Event, Kind

LANES = ("frames", "prefill", "thinker", "actions", "asr", "tts", "playback")
LANE_LABELS = {"thinker": "Thinker", "asr": "user / ASR", "tts": "TTS"}  # the other lanes go by their names
MAX_LABELS_PER_LANE = 30
LABEL_CHARS = 22

# kind -> (lane, marker, color, legend label); spans and texts are handled below.
MARKERS = {
    "frame_read": ("frames", "|", "tab:green", "frame read"),
    "frame_prefilled": ("prefill", "s", "tab:blue", "frame prefilled"),
    "frame_dropped": ("frames", "x", "tab:red", "frame dropped (stale or superseded)"),
    "engine_step": ("prefill", ".", "0.6", "engine step"),
    "token": ("thinker", ".", "0.35", "Thinker token"),
    "thinker_paragraph": ("thinker", "D", "tab:purple", "Thinker paragraph"),
    "thinker_note": ("thinker", "*", "tab:red", "Thinker note (its claims)"),
    "action_emitted": ("actions", "o", "tab:gray", "action emitted"),
    "action_executed": ("actions", "^", "tab:green", "action executed"),
    "action_fenced": ("actions", "X", "tab:red", "action fenced"),
    "user_input": ("asr", "*", "tab:orange", "user input"),
    "asr_partial": ("asr", "o", "tab:cyan", "ASR partial"),
    "asr_final": ("asr", "P", "tab:blue", "ASR endpoint (final)"),
    "tts_chunk": ("tts", "s", "tab:olive", "TTS chunk"),
    "playback_start": ("playback", ">", "tab:green", "playback start"),
    "playback_stop": ("playback", "<", "tab:red", "playback stop"),
    "barge_in": ("playback", "*", "tab:orange", "barge-in"),
}
TEXT_KINDS = {"thinker_paragraph", "thinker_note", "action_executed", "action_fenced", "asr_partial", "asr_final", "user_input", "tts_chunk"}
# kinds that share a lane at the same instant sit a little apart so neither hides the other
LANE_OFFSETS = {"action_emitted": 0.12, "action_executed": -0.12, "action_fenced": -0.12, "thinker_note": 0.12}


@dataclass(frozen=True)
class TimedEvent:
    t: float  # session seconds
    event: Event


def session_times(events: Sequence[Event]) -> list[TimedEvent]:
    """Events in seq order with their session time in seconds (see the module docstring)."""
    ordered = sorted(events, key=lambda e: e.seq)
    anchor = (0.0, ordered[0].t_mono if ordered else 0.0)  # (seconds, t_mono) of the last event with sim_ms
    timed = []
    for e in ordered:
        if e.sim_ms is not None:
            anchor = (e.sim_ms / 1000.0, e.t_mono)
        timed.append(TimedEvent(anchor[0] + (e.t_mono - anchor[1]), e))
    return timed


def event_text(event: Event) -> str:
    """The short text a timeline or video shows for an event ('' when it has none)."""
    p = event.payload
    for key in ("text", "action", "command", "name"):
        value = p.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and value:
            return "+".join(str(k) for k, v in value.items() if v) or "noop"
    return ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _playback_spans(timed: list[TimedEvent], end: float) -> list[tuple[float, float]]:
    spans, start = [], None
    for te in timed:
        if te.event.kind == Kind.PLAYBACK_START and start is None:
            start = te.t
        elif te.event.kind in ("playback_stop", "barge_in") and start is not None:
            spans.append((start, te.t))
            start = None
    if start is not None:
        spans.append((start, end))
    return spans


def _style_of(event: Event) -> tuple[str, str, str, str] | None:
    """(lane, marker, color, legend label) of an event the timeline draws; tokens not the Thinker's go to actions."""
    style = MARKERS.get(event.kind)
    if style is not None and event.kind == Kind.TOKEN and "think" not in event.stream:
        return "actions", style[1], "tab:brown", "token (actor and other streams)"
    return style


def render_timeline(events: Iterable[Event], out_png: str | Path, *, from_s: float | None = None,
                    to_s: float | None = None, title: str | None = None) -> dict:
    """Draw the [from_s, to_s] stretch (defaults: the whole recording) to out_png; returns what was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = session_times(list(events))
    all_t = [te.t for te in timed] or [0.0]
    lo = min(all_t) if from_s is None else float(from_s)
    hi = max(all_t) if to_s is None else float(to_s)
    if hi < lo:
        raise UserError(f"empty time range: --from {lo:g} is after --to {hi:g}")
    hi = lo + 1.0 if hi == lo else hi
    shown = [te for te in timed if lo <= te.t <= hi]
    # the lanes the whole recording has events in (all for an empty one): a headless run shows no empty
    # TTS/playback lanes, and every stretch of one recording gets the same lanes
    in_use = {style[0] for style in map(_style_of, (te.event for te in timed)) if style is not None}
    lanes = tuple(lane for lane in LANES if lane in in_use) or LANES
    lane_y = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}

    fig, ax = plt.subplots(figsize=(14, 2.0 + 0.65 * len(lanes)), dpi=110)
    for lane, y in lane_y.items():
        ax.axhline(y, color="0.92", lw=8, zorder=0)
    for start, stop in _playback_spans(timed, max(all_t)):  # playback as bars (start..stop), clipped to the window
        if stop >= lo and start <= hi and "playback" in lane_y:
            ax.broken_barh([(max(start, lo), min(stop, hi) - max(start, lo))], (lane_y["playback"] - 0.18, 0.36),
                           color="tab:green", alpha=0.35, zorder=1)
    used = _draw_events(ax, shown, lane_y)
    n_bumps = _draw_bumps(ax, timed, shown, lo, top=len(lanes) - 0.4)
    if n_bumps:
        used.setdefault("generation bump (interruption)", ("|", "tab:red", n_bumps))
    _finish_axes(ax, lanes, lane_y, shown, lo, hi, title, used)
    fig.tight_layout()
    out = Path(out_png)
    try:
        fig.savefig(out)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return {"path": str(out), "from_s": lo, "to_s": hi, "n_events": len(shown), "n_generation_bumps": n_bumps,
            "drawn": {legend: count for legend, (_, _, count) in used.items()}}


def _draw_events(ax, shown, lane_y: dict) -> dict[str, tuple]:
    """One marker per event in its lane, with a few labels per lane; returns the legend entries used (marker,
    color, how many drawn)."""
    used: dict[str, tuple] = {}
    labels_in_lane: dict[str, int] = {}
    last_label: dict[tuple[str, str], str] = {}  # a label repeats only when its text changed (ATTACK, ATTACK, ...)
    for te in shown:
        kind, style = te.event.kind, _style_of(te.event)
        if style is None:
            continue
        lane, marker, color, legend = style
        y, size = lane_y[lane], 4 if kind in (Kind.TOKEN, Kind.ENGINE_STEP) else 8
        ax.plot([te.t], [y + LANE_OFFSETS.get(kind, 0.0)], marker=marker, color=color, markersize=size,
                linestyle="none", zorder=3)
        used[legend] = (marker, color, used.get(legend, (None, None, 0))[2] + 1)
        text = event_text(te.event) if kind in TEXT_KINDS else ""
        if kind == Kind.ASR_FINAL:
            text = "endpoint: " + text if text else "endpoint"
        if text and last_label.get((lane, kind)) == text and kind != Kind.USER_INPUT:
            continue
        last_label[(lane, kind)] = text
        if text and labels_in_lane.get(lane, 0) < MAX_LABELS_PER_LANE:
            labels_in_lane[lane] = labels_in_lane.get(lane, 0) + 1
            offset = 0.22 if labels_in_lane[lane] % 2 else -0.32
            ax.text(te.t, y + offset, _short(text), fontsize=6.5, color=color, ha="left", va="bottom", zorder=4)
    return used


def _draw_bumps(ax, timed, shown, lo: float, *, top: float) -> int:
    """Every interruption as a vertical line through all lanes, numbered at the top; returns how many."""
    generation_at_start = next((te.event.generation for te in reversed(timed) if te.t < lo), 0)
    ax.text(lo, top + 0.15, f"gen {generation_at_start}", fontsize=8, color="tab:red", ha="left", va="bottom")
    bumps = [te for te in shown if te.event.kind == Kind.GENERATION_BUMP]
    for te in bumps:
        gen = te.event.payload.get("to", te.event.payload.get("generation", te.event.generation))
        reason = te.event.payload.get("reason", "")
        ax.axvline(te.t, color="tab:red", lw=1.2, ls="--", zorder=2)
        ax.text(te.t, top + 0.15, f"gen {gen}" + (f" ({_short(str(reason))})" if reason else ""),
                fontsize=8, color="tab:red", ha="center", va="bottom", rotation=0)
    return len(bumps)


def _finish_axes(ax, lanes, lane_y, shown, lo: float, hi: float, title, used: dict) -> None:
    from matplotlib.lines import Line2D

    ax.set_yticks([lane_y[lane] for lane in lanes], [LANE_LABELS.get(lane, lane) for lane in lanes])
    ax.set(ylim=(-0.7, len(lanes) + 0.3), xlim=(lo - 0.01 * (hi - lo), hi + 0.01 * (hi - lo)))
    clocks = sorted({te.event.clock for te in shown})
    ax.set_xlabel("session time (s)" + (f", {clocks[0]} clock" if len(clocks) == 1 else ""))
    ax.grid(axis="x", color="0.85", lw=0.5)
    ax.set_title(title or "session timeline", fontsize=10, loc="left")
    if not shown:
        ax.text((lo + hi) / 2, len(lanes) / 2, "no events in this time range", ha="center", color="0.4")
    handles = [Line2D([], [], marker=m, color=c, linestyle="none", label=name) for name, (m, c, _) in used.items()]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
