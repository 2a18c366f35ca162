"""`bench soak`: a long real-time live session with scripted voice commands and barge-ins; does it stay flat?

First fifth against last: RSS, KV pages (both after a warm-up), reaction p95, barge-in p95 from speech onset; no
event sequence gaps.
Microphone and speaker keep no audio (30 minutes of it would be ~275 MB of RSS growth that is not the runtime's).
"""

import itertools
import threading
import time
from array import array
from collections import Counter
from dataclasses import dataclass

import numpy as np
import psutil

from agent_runtime import signals
from agent_runtime.benchmarks.measure import progress, save_figure, shown, stats, subplots
from agent_runtime.benchmarks.scripted_voice import (BargeInTrial, BlockSpeaker, ScriptedMicrophone, measure, open_voice,
                                                     speak, synthesize_phrases, wait_until)
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.live_session import run_live
from agent_runtime.percentiles import percentile
from agent_runtime.voice.voice_io import MIC_RATE, VoiceIO

SCRIPT = ("turn left", "shoot", "stop", "what do you see", "turn right", "shoot", "go back", "turn left")
EVERY_S = 4.0  # the quiet gap after each scripted phrase, in which the agent may start a remark
PATIENCE = 3.0  # then wait up to PATIENCE * EVERY_S for audible commentary to speak over; else speak anyway
TARGET_BARGE_IN_P95_MS = 150.0  # onset -> silence, whole run
TARGET_RSS_GROWTH_PCT = 5.0  # first fifth -> last fifth of the time after the memory warm-up
# RSS climbs while caches fill (oneDNN primitives per batch shape, voice buffers): memory is compared from the end of
# the first 20% of the session (at most 30 s), so a one-minute soak measures growth, not its own warm-up
MEMORY_WARMUP_S = 30.0
TARGET_DRIFT_PCT = 20.0  # last fifth's p95 within this much of the first fifth's
REORDER_WINDOW = 4096  # events may reach a sink out of order (several threads emit); a seq missing this long is a gap


class SoakEvents:
    """An EventBus sink that keeps only what the soak reports, bounded: the sequence check, the reaction samples
    (16 bytes each) and a count per event kind. Thread-safe (engine and audio threads emit)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.next_seq = 0  # every number below this was seen
        self._ahead: set[int] = set()  # seen, above next_seq
        self.gaps = self.duplicates = self.count = 0
        self.kinds: Counter[str] = Counter()
        self.reaction_t, self.reaction_ms = array("d"), array("d")

    def write(self, event) -> None:
        with self._lock:
            self.count += 1
            self.kinds[event.kind] += 1
            self._check(event.seq)
            if event.kind == Kind.ACTION_EXECUTED:
                self.reaction_t.append(event.t_mono)
                self.reaction_ms.append(float(event.payload.get("frame_age_ms", 0.0)))

    def _check(self, seq: int) -> None:
        if seq < self.next_seq or seq in self._ahead:
            self.duplicates += 1
            return
        self._ahead.add(seq)
        if len(self._ahead) > REORDER_WINDOW:  # next_seq never came: it is missing
            low = min(self._ahead)
            self.gaps += low - self.next_seq
            self.next_seq = low
        while self.next_seq in self._ahead:
            self._ahead.remove(self.next_seq)
            self.next_seq += 1

    def seq_gaps(self) -> int:
        """Numbers below the highest one seen that never arrived."""
        with self._lock:
            missing = (max(self._ahead) + 1 - self.next_seq - len(self._ahead)) if self._ahead else 0
            return self.gaps + missing


class _Background(threading.Thread):
    """A daemon thread running `run` until `stop()` sets `stopping`."""

    def __init__(self, name: str, join_s: float):
        super().__init__(name=name, daemon=True)
        self.stopping, self._join_s = threading.Event(), join_s

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=self._join_s)


class Sampler(_Background):
    """Process RSS (MB) and KV pages in use, once a second, on its own thread."""

    def __init__(self, store):
        super().__init__("soak-sampler", join_s=5)
        self.store, self._process = store, psutil.Process()
        self.samples: list[tuple[float, float, int]] = []  # (t_mono, rss_mb, kv_pages)

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            self.samples.append((time.monotonic(), self._process.memory_info().rss / 2**20, self.store.used_pages))


@dataclass
class SoakTrial(BargeInTrial):
    """One scripted phrase (offset_s: its onset after the commentary became audible): a barge-in when commentary
    was audible as it began, else only a voice command."""

    t_s: float = 0.0  # onset, seconds into the session
    during_commentary: bool = False
    onset_to_detection_ms: float | None = None
    onset_to_silence_ms: float | None = None
    vad_audio_ms: float | None = None  # of that, speech the VAD heard before it fired (its own stream time)
    cue: str | None = None  # what silenced playback first: "fricative" or "vad" (a tentative onset), or "speech"


class Director(_Background):
    """Speaks the script into the microphone and measures each barge-in. Every phrase bumps the generation (the
    remark stops), so a fixed beat would leave the agent nothing to say: after `every_s` of quiet the next phrase
    comes once commentary is audible (a barge-in), or after PATIENCE * every_s without (a command only)."""

    def __init__(self, voice: VoiceIO, mic: ScriptedMicrophone, speaker: BlockSpeaker, phrases: dict, *,
                 every_s: float, seed: int, t0: float, sampler: Sampler):
        super().__init__("soak-director", join_s=10)
        self.voice, self.mic, self.speaker, self.phrases = voice, mic, speaker, phrases
        self.every_s, self.t0, self.sampler = every_s, t0, sampler
        self.rng = np.random.default_rng(seed)
        self.trials: list[SoakTrial] = []

    def run(self) -> None:
        wait_until(lambda: self.stopping.is_set() or self.mic.t_origin is not None, 10.0)
        for i in itertools.count():
            phrase = SCRIPT[i % len(SCRIPT)]
            # speak over the commentary when it sounds (remarks are short: right after they start)
            heard = wait_until(lambda: self.stopping.is_set() or self.speaker.audible, PATIENCE * self.every_s)
            if self.stopping.is_set():
                return
            heard_at = time.monotonic()
            if heard:
                time.sleep(float(self.rng.uniform(0.03, 0.15)))
            trial = self._one(phrase, heard_at, during_commentary=heard and self.speaker.audible)
            if trial is not None:
                self.trials.append(trial)
                self._report(trial)
            if self.stopping.wait(self.every_s):
                return

    def _one(self, phrase: str, heard_at: float, during_commentary: bool) -> SoakTrial | None:
        heard = speak(self.voice, self.mic, self.phrases[phrase], timeout=8.0, stopped=self.stopping.is_set)
        if heard is None:
            return None  # the session ended mid-phrase: nothing to measure
        onset, record = heard.onset, heard.record
        trial = SoakTrial(phrase, round(onset - heard_at, 3) if during_commentary else 0.0,
                          t_s=round(onset - self.t0, 2), during_commentary=during_commentary)
        if not heard.settled:  # still "hearing" 8 s on: the listener fell behind (see mic_overruns)
            trial.outcome = "unsettled"
            return trial
        if record is None:
            trial.outcome = "missed" if during_commentary else "command_only"
            return trial
        measure(trial, record, self.voice.playback, self.speaker)
        trial.cue = record.cue
        trial.onset_to_detection_ms = (record.detected_wall - onset) * 1000.0
        if self.voice.mic_blocks_dropped == 0:  # the VAD's stream time is the microphone's sample count
            trial.vad_audio_ms = record.detected_ms - heard.onset_sample * 1000.0 / MIC_RATE
        if trial.detection_to_silence_ms is not None:
            trial.onset_to_silence_ms = trial.onset_to_detection_ms + trial.detection_to_silence_ms
        return trial

    def _report(self, trial: SoakTrial) -> None:
        _, rss, pages = self.sampler.samples[-1] if self.sampler.samples else (0.0, 0.0, 0)
        if trial.onset_to_silence_ms is not None:
            what = (f"barge-in {trial.outcome}: onset -> silence {trial.onset_to_silence_ms:.0f} ms "
                    f"(detection -> silence {trial.detection_to_silence_ms:.0f} ms)")
        else:
            what = {"missed": "commentary ended before the barge-in was detected",
                    "command_only": "no commentary playing: a voice command only",
                    "unsettled": "the listener had not finished with it 8 s later"}.get(trial.outcome, trial.outcome)
        progress(f"{trial.t_s:6.1f} s {trial.phrase!r}: {what}; rss {rss:.0f} MB, kv {pages} pages", done=trial.t_s)


def run_soak(env, runtime, *, seconds: float, seed: int = 0, mode: str = "immediate", every_s: float = EVERY_S) -> dict:
    """Play `seconds` of real time with the scripted voice; returns the summary (JSON-ready).

    SIGINT/SIGTERM stop it after the current engine step: the signals.Interrupted raised carries the summary
    of what was measured so far as `soak_result` (with complete false)."""
    phrases = synthesize_phrases(SCRIPT)
    sink = SoakEvents()
    bus = EventBus("soak", clock="realtime", keep=False)
    bus.sinks.append(sink)
    voice, mic, speaker = open_voice(phrases, mode=mode, seed=seed, bus=bus)
    sampler = Sampler(runtime.store)
    t0 = time.monotonic()
    director = Director(voice, mic, speaker, phrases, every_s=every_s, seed=seed, t0=t0, sampler=sampler)
    progress(f"soak: {seconds / 60:g} min of real-time play; a scripted phrase over the agent's commentary "
             f"{every_s:g} s or more after the last one (barge-in mode {mode}); Ctrl-C stops it and keeps what was "
             "measured")
    sampler.start()
    director.start()
    live, stopped = None, None
    try:
        live = run_live(env, runtime, seconds=seconds, voice=voice, bus=bus)
    except signals.Interrupted as e:
        stopped = e
    finally:
        t1 = time.monotonic()
        director.stop()
        sampler.stop()
    result = summarize(sampler.samples, sink, director.trials, t0, t1)
    records = list(voice.controller.records)
    result.update(mode=mode, seed=seed, every_s=every_s, complete=live is not None, live=live,
                  kv_pool_pages=runtime.store.num_pages,
                  barge_in_cues=dict(Counter(r.cue for r in records if r.outcome == "interrupted")),
                  pauses_resumed=sum(r.outcome == "resumed" for r in records))
    if stopped is not None:
        stopped.soak_result = result
        raise stopped
    return result


def _memory(samples, first, last) -> dict:
    def median(fifth, col):
        values = [s[col] for s in samples if fifth[0] <= s[0] < fifth[1]]
        return float(np.median(values)) if values else None

    out, growth = {}, {}
    for name, short, col in (("rss_mb", "rss", 1), ("kv_pages", "kv", 2)):
        a, b = median(first, col), median(last, col)
        out.update({f"{name}_first_fifth": a, f"{name}_last_fifth": b,
                    f"{name}_max": max((s[col] for s in samples), default=None)})
        growth[f"{short}_growth_pct"] = None if a is None or b is None or a <= 0 else (b - a) / a * 100.0
    return {**out, **growth}


def _latencies(sink: SoakEvents, trials: list[SoakTrial], t0: float, first, last) -> dict:
    rt, rms = np.frombuffer(sink.reaction_t, float), np.frombuffer(sink.reaction_ms, float)
    barge = [t for t in trials if t.onset_to_silence_ms is not None]

    def in_fifth(fifth, times):
        return (times >= fifth[0]) & (times < fifth[1])

    def barge_p95(fifth):
        return percentile([t.onset_to_silence_ms for t in barge if fifth[0] <= t0 + t.t_s < fifth[1]], 95)

    return {
        "reaction_ms_p50": percentile(rms, 50), "reaction_ms_p95": percentile(rms, 95),
        "reaction_ms_p95_first_fifth": percentile(rms[in_fifth(first, rt)], 95),
        "reaction_ms_p95_last_fifth": percentile(rms[in_fifth(last, rt)], 95),
        "barge_ins": len(barge), "barge_ins_attempted": sum(t.during_commentary for t in trials),
        "barge_ins_missed": sum(t.outcome == "missed" for t in trials), "voice_phrases": len(trials),
        **stats("barge_in_ms", [t.onset_to_silence_ms for t in barge]),
        "barge_in_ms_p95_first_fifth": barge_p95(first), "barge_in_ms_p95_last_fifth": barge_p95(last),
        **stats("barge_in_detection_ms", [t.detection_to_silence_ms for t in barge], ("p50", "p95")),
        **stats("onset_to_detection_ms", [t.onset_to_detection_ms for t in barge], ("p50", "p95")),
        "vad_audio_ms_p50": percentile([t.vad_audio_ms for t in barge if t.vad_audio_ms is not None], 50),
    }


def summarize(samples, sink: SoakEvents, trials: list[SoakTrial], t0: float, t1: float) -> dict:
    """The report: memory and latencies first fifth vs last fifth, sequence gaps, counters and pass flags."""
    fifth = (t1 - t0) / 5.0
    first, last = (t0, t0 + fifth), (t1 - fifth, t1 + 1e-9)
    warm = t0 + min(MEMORY_WARMUP_S, fifth)
    memory = _memory(samples, (warm, warm + (t1 - warm) / 5.0), (t1 - (t1 - warm) / 5.0, t1 + 1e-9))
    result = {"seconds": round(t1 - t0, 1), "memory_warmup_s": round(warm - t0, 1), **memory,
              **_latencies(sink, trials, t0, first, last),
              "events": sink.count, "seq_gaps": sink.seq_gaps(), "seq_duplicates": sink.duplicates,
              "actions_executed": sink.kinds["action_executed"], "actions_fenced": sink.kinds["action_fenced"],
              "frames_dropped": sink.kinds["frame_dropped"], "mic_overruns": sink.kinds["mic_overrun"],
              "audio_device_losses": sink.kinds["audio_device_lost"]}
    result["targets"] = {"rss_growth_pct_below": TARGET_RSS_GROWTH_PCT, "seq_gaps": 0,
                         "barge_in_ms_p95_at_most": TARGET_BARGE_IN_P95_MS,
                         "last_fifth_p95_within_pct_of_first": TARGET_DRIFT_PCT}
    g, b95 = result["rss_growth_pct"], result["barge_in_ms_p95"]
    flags = {"passed_rss_growth": None if g is None else g < TARGET_RSS_GROWTH_PCT,
             "passed_seq_gaps": result["seq_gaps"] == 0 and result["seq_duplicates"] == 0,
             "passed_barge_in_p95": None if b95 is None else b95 <= TARGET_BARGE_IN_P95_MS}
    for name in ("reaction", "barge_in"):
        a, b = result[f"{name}_ms_p95_first_fifth"], result[f"{name}_ms_p95_last_fifth"]
        flags[f"passed_{name}_drift"] = None if a is None or b is None else b <= a * (1.0 + TARGET_DRIFT_PCT / 100.0)
    result.update(flags, passed=all(v is True for v in flags.values()))
    result["samples"] = [[round(t - t0, 2), round(rss, 1), pages] for t, rss, pages in samples]
    reactions = list(zip(sink.reaction_t, sink.reaction_ms))
    step = max(1, len(reactions) // 2000)  # about 2000 points: the plot needs no more
    result["reaction_series"] = [[round(t - t0, 2), round(ms, 1)] for t, ms in reactions[::step]]
    result["trials"] = [dict(vars(t)) for t in trials]
    result["events_by_kind"] = dict(sink.kinds)
    return result


def plot_soak(result: dict, path, title: str) -> None:
    """RSS, KV pages and latencies over the session, fifth boundaries dotted."""
    samples = np.asarray(result["samples"], float).reshape(-1, 3)
    fig, (ax1, ax2, ax3) = subplots(3, 1, figsize=(8, 7), dpi=110, sharex=True)
    for ax, col, color, label in ((ax1, 1, "tab:red", "process RSS (MB)"), (ax2, 2, "tab:blue", "KV pages in use")):
        ax.plot(samples[:, 0] / 60, samples[:, col], color=color, lw=1)
        ax.set_ylabel(label)
    reaction = np.asarray(result["reaction_series"], float).reshape(-1, 2)
    ax3.plot(reaction[:, 0] / 60, reaction[:, 1], ".", ms=2, color="tab:gray", label="reaction (frame age)")
    barge = [(t["t_s"], t["onset_to_silence_ms"]) for t in result["trials"] if t["onset_to_silence_ms"] is not None]
    if barge:
        bt, bm = zip(*barge)
        ax3.plot(np.asarray(bt) / 60, bm, "o", ms=4, color="tab:orange", label="barge-in onset -> silence")
    ax3.axhline(TARGET_BARGE_IN_P95_MS, color="tab:orange", ls="--", lw=0.8, label="barge-in target p95")
    ax3.set(ylabel="ms", xlabel="minutes into the session")
    ax3.legend(fontsize=7, loc="upper right")
    for ax in (ax1, ax2, ax3):
        for k in range(1, 5):
            ax.axvline(result["seconds"] * k / 5 / 60, color="k", ls=":", lw=0.6)
    ax1.set_title(title, fontsize=9)
    save_figure(fig, path)


def print_report(result: dict) -> None:
    """The human-readable summary: first fifth vs last fifth, then the targets."""
    f = shown
    ok = {True: "met", False: "NOT met", None: "n/a"}.get
    print(f"soak: {result['seconds']:.0f} s of real-time play{'' if result['complete'] else ' (stopped early)'}, "
          f"{result['voice_phrases']} voice phrases, {result['barge_ins']} barge-ins measured "
          f"({result['barge_ins_attempted']} over commentary, {result['barge_ins_missed']} missed)")
    print(f"                      first fifth   last fifth   growth (memory after {result['memory_warmup_s']:g} s)")
    growth = {"rss_mb": f"   {f(result['rss_growth_pct'], '%', '+.1f')}",
              "kv_pages": f"   {f(result['kv_growth_pct'], '%', '+.1f')}  (pool {result['kv_pool_pages']})"}
    for label, key in (("RSS (MB)", "rss_mb"), ("KV pages in use", "kv_pages"),
                       ("reaction p95 (ms)", "reaction_ms_p95"), ("barge-in p95 (ms)", "barge_in_ms_p95")):
        first, last = f(result[key + "_first_fifth"]), f(result[key + "_last_fifth"])
        print(f"{label:22s}{first:>11s}  {last:>11s}{growth.get(key, '')}")
    print(f"barge-in from speech onset: p50 {f(result['barge_in_ms_p50'], ' ms')}, p95 {f(result['barge_in_ms_p95'], ' ms')}"
          f" (onset -> VAD detection p50 {f(result['onset_to_detection_ms_p50'], ' ms')}, of which speech the VAD "
          f"needed p50 {f(result['vad_audio_ms_p50'], ' ms')}; detection -> silence p95 "
          f"{f(result['barge_in_detection_ms_p95'], ' ms')})")
    cues = ", ".join(f"{k} {v}" for k, v in sorted(result.get("barge_in_cues", {}).items())) or "none"
    print(f"barge-ins silenced first by: {cues}; pauses resumed (no speech confirmed) "
          f"{result.get('pauses_resumed', 0)}")
    print(f"events {result['events']}, sequence gaps {result['seq_gaps']}, actions {result['actions_executed']} "
          f"executed / {result['actions_fenced']} fenced, frames dropped {result['frames_dropped']}, "
          f"mic overruns {result['mic_overruns']}, audio devices lost {result['audio_device_losses']}")
    print(f"targets: RSS growth < {TARGET_RSS_GROWTH_PCT:g}% {ok(result['passed_rss_growth'])}; no sequence gaps "
          f"{ok(result['passed_seq_gaps'])}; barge-in p95 <= {TARGET_BARGE_IN_P95_MS:g} ms from onset "
          f"{ok(result['passed_barge_in_p95'])}; last-fifth p95 within {TARGET_DRIFT_PCT:g}% of the first: reaction "
          f"{ok(result['passed_reaction_drift'])}, barge-in {ok(result['passed_barge_in_drift'])}")
