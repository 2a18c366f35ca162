"""`bench words`: how many claims in the Thinker's notes and in the spoken remarks are true of the game at the tic they
were written, beside the planner's notes and the describer's remarks at the same moments (the labels a trained
agent learns from: the most it can reach).

Each text is cut into the fixed vocabulary's phrases (thinking/vocabulary.py); a phrase outside it claims nothing
and is counted apart. The judge reads the engine's state (label buffer, every object's position: the env runs with
its objects info on), which no view holds. Also: notes written per minute of game time and how many decisions had
a note in view (the newest paragraph made at least one claim).
"""

from __future__ import annotations

from collections import Counter, deque

from envs.observation_text import encode_seen, encode_status

from agent_runtime.benchmarks.measure import save_figure, subplots
from agent_runtime.control.action_grammar import parse_command_text
from agent_runtime.engine.prompts import thought_text
from agent_runtime.session.clocks import MS_PER_TIC
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.thinking.describer import describe
from agent_runtime.thinking.judge import holds
from agent_runtime.thinking.planner import note_for
from agent_runtime.thinking.vocabulary import parse_claims

# the model's texts, each beside its labeller's; notes_at_start: the same notes judged at the frame their paragraph
# began on (what the Thinker read), to tell what it learned wrong from what changed while it wrote
SOURCES = ("notes", "notes_at_start", "planner", "remarks", "describer")
FRAMES_KEPT = 64  # frames the tap remembers, by tic: a prefilled frame is at most a few steps old


class FrameTap:
    """An env whose frames are remembered by tic as they are read: the judge's view of the game."""

    def __init__(self, env):
        self._env = env
        self.frames: dict[int, object] = {}
        self.newest = None

    def __getattr__(self, name):
        return getattr(self._env, name)

    def new_episode(self, *args, **kwargs):
        self.frames.clear()
        return self._seen(self._env.new_episode(*args, **kwargs))

    def read_frame(self):
        return self._seen(self._env.read_frame())

    def _seen(self, frame):
        if frame is not None:
            self.newest = self.frames[frame.tic] = frame
            for tic in [t for t in self.frames if t < frame.tic - FRAMES_KEPT]:
                del self.frames[tic]
        return frame


class Tally:
    """One source's texts and its claims, true, false and not decidable, per kind."""

    def __init__(self):
        self.texts = self.no_claim_phrases = 0
        self.verdicts: Counter = Counter()  # (kind, True | False | None) -> claims
        self.examples: list[str] = []

    def judge(self, text: str, frame, doing: str | None) -> None:
        """Judge `text` against `frame`."""
        claims, noise = parse_claims(text)
        self.texts += 1
        self.no_claim_phrases += noise
        for claim in claims:
            self.verdicts[(claim.kind, holds(claim, frame, doing))] += 1
        if len(self.examples) < 5:
            self.examples.append(text)

    def summary(self) -> dict:
        true = sum(n for (_, v), n in self.verdicts.items() if v is True)
        false = sum(n for (_, v), n in self.verdicts.items() if v is False)
        kinds = sorted({k for k, _ in self.verdicts})
        return {"texts": self.texts, "claims": true + false, "true": true, "false": false,
                "undecided": sum(n for (_, v), n in self.verdicts.items() if v is None),
                "true_fraction": true / (true + false) if true + false else None,
                "no_claim_phrases": self.no_claim_phrases,
                "per_kind": {k: {"true": self.verdicts[(k, True)], "false": self.verdicts[(k, False)]} for k in kinds},
                "examples": self.examples}


class WordsJudge:
    """An event sink: each paragraph and remark judged at the newest frame the game has shown (the tic it was
    written), and the labellers' texts for the same moment judged alike."""

    def __init__(self, tap: FrameTap, frames_in_view: int, *, signed: bool = True):
        self.tap, self.signed = tap, signed
        self.lines: deque[str] = deque(maxlen=frames_in_view)  # the Thinker's frames, as lines (no turn in flight)
        self.tallies = {name: Tally() for name in SOURCES}
        self.doing: tuple[str, int, int] | None = None  # (button, start tic, tics) of the action executed last
        self.planner_note: str | None = None
        self.paragraph_start = None  # the game's newest frame when the paragraph under way wrote its first token

    def new_episode(self) -> None:
        """A new episode, played by a new agent (run_llm_episode): the last one's frames and notes are gone."""
        self.lines.clear()
        self.doing = self.planner_note = self.paragraph_start = None

    def _under_way(self, tic: int) -> str:
        if self.doing is None:
            return "NOOP"
        name, start, tics = self.doing
        return name if start <= tic < start + tics else "NOOP"

    def write(self, event) -> None:
        kind, frame = event.kind, self.tap.newest
        if kind == Kind.FRAME_PREFILLED and event.tic in self.tap.frames:
            self.lines.append(encode_seen(self.tap.frames[event.tic], signed=self.signed))
        elif kind == Kind.ACTION_EXECUTED and event.tic is not None:
            name, tics = parse_command_text(event.payload["command"])
            self.doing = (name, event.tic, tics)
        elif kind == Kind.TOKEN and event.stream == "thinker" and self.paragraph_start is None:
            self.paragraph_start = frame
        elif kind == Kind.THINKER_PARAGRAPH and frame is not None and self.lines:
            text, start = thought_text(event.payload["text"]), self.paragraph_start or frame
            self.paragraph_start = None
            self.tallies["notes"].judge(text, frame, self._under_way(frame.tic))
            self.tallies["notes_at_start"].judge(text, start, self._under_way(start.tic))
            self.planner_note = note_for(list(self.lines), encode_status(frame), self.planner_note)
            self.tallies["planner"].judge(self.planner_note, frame, self._under_way(frame.tic))
        elif kind == Kind.COMMENTARY_SENTENCE and frame is not None:
            doing = self._under_way(frame.tic)
            self.tallies["remarks"].judge(event.payload["text"], frame, doing)
            line = self.lines[-1] if self.lines else encode_seen(frame, signed=self.signed)
            self.tallies["describer"].judge(describe(line, encode_status(frame), doing), frame, doing)


def run_words_bench(env, runtime, *, episodes: int, seed: int, max_tics: int | None, fixed_cost, progress) -> dict:
    """`episodes` episodes of the multi-stream agent (Thinker and remarks on) on seeds seed.., judged as they play."""
    tap = FrameTap(env)
    budgets = runtime.config.budgets
    judge = WordsJudge(tap, budgets.thinker_frames_in_view or budgets.frames_in_view,
                       signed=runtime.config.engine.signed_bearings)
    bus = EventBus("bench_words", keep=False)
    bus.sinks.append(judge)
    totals = dict.fromkeys(("tics", "notes", "decisions", "decisions_with_note"), 0)
    for i in range(episodes):
        judge.new_episode()
        result = run_llm_episode(tap, runtime, seed=seed + i, max_tics=max_tics, fixed_cost=fixed_cost, bus=bus,
                                 agent_seed=seed + i, commentary=True)
        totals = {key: n + max(result[key], 0) for key, n in totals.items()}
        progress(f"episode {i + 1}/{episodes}: {result['tics']} tics, {result['notes']} notes", i + 1)
    return {"episodes": episodes, "seeds": [seed + i for i in range(episodes)], **note_rates(totals),
            "decisions": totals["decisions"], "decisions_with_note": totals["decisions_with_note"],
            "sources": {name: tally.summary() for name, tally in judge.tallies.items()}}


def note_rates(totals: dict) -> dict:
    """Notes written per minute of game time and the share of decisions with a note in view, from episode results'
    summed tics, notes, decisions and decisions_with_note."""
    minutes = totals["tics"] * MS_PER_TIC / 60000.0
    return {"game_minutes": round(minutes, 2), "notes_per_minute": totals["notes"] / minutes if minutes else None,
            "decisions_with_note_fraction": (totals["decisions_with_note"] / totals["decisions"]
                                             if totals["decisions"] else None)}


def plot_words(result: dict, path, title: str) -> None:
    """True fraction of the claims per source, the model's beside its labeller's."""
    names = list(result["sources"])
    fractions = [result["sources"][n]["true_fraction"] or 0.0 for n in names]
    fig, ax = subplots(figsize=(6, 3.4))
    bars = ax.bar(names, fractions, color=["tab:gray" if n in ("planner", "describer") else "tab:blue" for n in names])
    for bar, n in zip(bars, names):
        ax.annotate(f"{result['sources'][n]['claims']} claims", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set(ylim=(0, 1.1), ylabel="claims true at the tic written", title=title)
    ax.tick_params(axis="x", labelrotation=15)
    save_figure(fig, path, dpi=110)
