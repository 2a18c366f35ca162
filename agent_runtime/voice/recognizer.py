"""Streaming command recognition: silero VAD endpointing in front of pocketsphinx with a JSGF grammar. Partial
hypotheses can change; only a `StablePrefix` or a final result is meant to be committed.
"""

import time
from collections import deque
from dataclasses import dataclass, field
from os.path import commonprefix  # of any sequences: here, lists of words

import numpy as np

from agent_runtime.optional import require
from agent_runtime.voice.vad import (SAMPLE_RATE, WINDOW_MS, OnsetEvent, SpeechStarted, SpeechStopped, VadEvent,
                                     VoiceActivityDetector)
from agent_runtime.voice.voice_commands import PHRASES, command_for, jsgf_grammar, normalize


@dataclass(frozen=True)
class UtteranceCut:
    """An utterance ran past max_utterance_ms (a 10-minute monologue, music, a stuck VAD): its final came at
    `t_ms`, and the rest of that speech is not recognized, so the decoder's work and memory stay bounded."""

    t_ms: float
    started_ms: float
    max_ms: float


@dataclass(frozen=True)
class Hypothesis:
    """What the recognizer believes was said so far in one utterance; t_ms: the stream time of its newest audio,
    audio_age_ms: how long ago (wall clock) that audio arrived."""

    text: str
    command: str | None
    final: bool
    t_ms: float
    audio_age_ms: float
    utterance: int
    speech_start_ms: float
    speech_end_ms: float | None  # finals only: where the VAD put the end of speech
    settled: bool = False  # a partial after `settle_ms` of quiet: the speaker paused or stopped (finals: False)
    coverage: float = 1.0  # the share of the utterance's loud audio its words span (CommandRecognizer.coverage)

    def to_json(self) -> dict:
        return {"text": self.text, "final": self.final, "t_ms": round(self.t_ms, 1),
                "audio_age_ms": round(self.audio_age_ms, 1), "command": self.command,
                "coverage": round(self.coverage, 3)}


COMMAND_PAUSE_MS = 64  # two VAD windows of quiet after a whole phrase (config: voice.command_pause_ms)
DECODER_FRAME = SAMPLE_RATE // 100  # samples of one pocketsphinx frame (10 ms)
LOUD_FRACTION = 0.1  # a frame above this fraction of the utterance's loudest RMS (-20 dB) is speech to account for


class CommandRecognizer:
    """pocketsphinx decoding against the command grammar, incrementally. CMN only adapts while decoding, so a
    session's first utterance is often misheard ("turn left" -> "shoot"): the first `warmup_utterances` finals are
    decoded a second time with the adapted CMN (~10 ms)."""

    def __init__(self, warmup_utterances: int = 1):
        ps = require("pocketsphinx", "voice")
        config = ps.Config(loglevel="FATAL")  # grammar-mismatch notices would clutter CLI stderr
        config["samprate"] = SAMPLE_RATE
        self.decoder = ps.Decoder(config)
        self.decoder.add_jsgf_string("commands", jsgf_grammar())
        self.decoder.activate_search("commands")
        self.in_utterance, self.warmup_left, self._audio = False, warmup_utterances, []
        self.utterance_samples = 0  # fed since the utterance started: bounded by the pipeline's max_utterance_ms
        self._levels: list[float] = []  # RMS of each decoder frame of the utterance
        self._unframed = np.zeros(0, np.float32)

    def start(self) -> None:
        self.decoder.start_utt()
        self.in_utterance, self._audio, self.utterance_samples = True, [], 0
        self._levels, self._unframed = [], np.zeros(0, np.float32)

    def feed(self, samples: np.ndarray) -> None:
        self.utterance_samples += len(samples)
        pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
        if self.warmup_left > 0:
            self._audio.append(pcm)
        self.decoder.process_raw(pcm, False, False)
        audio = np.concatenate([self._unframed, np.asarray(samples, np.float32)])
        whole = len(audio) // DECODER_FRAME
        frames = audio[: whole * DECODER_FRAME].reshape(whole, DECODER_FRAME)
        self._levels.extend(np.sqrt(np.mean(np.square(frames), axis=1)).tolist())
        self._unframed = audio[whole * DECODER_FRAME:]

    def coverage(self) -> float:
        """The share of the utterance's loud frames (within 20 dB of its loudest) that the hypothesis's words
        span. The grammar maps any speech to its nearest phrase; a phrase forced onto part of a longer sentence
        leaves the rest of it to silence and fillers."""
        levels = np.asarray(self._levels)
        if not levels.size:
            return 1.0
        loud, spoken = levels > LOUD_FRACTION * levels.max(), np.zeros(levels.size, bool)
        for segment in self.decoder.seg() or []:
            if not segment.word.startswith(("<", "[", "+")):  # <sil>, <s>, [NOISE], +SPN+: not words
                spoken[segment.start_frame: segment.end_frame + 1] = True
        return float((loud & spoken).sum() / max(1, loud.sum()))

    @property
    def warmed_up(self) -> bool:
        """CMN has adapted (the first utterances' finals are decoded again with it; their partials are not)."""
        return self.warmup_left == 0

    def partial(self) -> str:
        hyp = self.decoder.hyp()
        return normalize(hyp.hypstr) if hyp is not None else ""

    def finish(self) -> str:
        self.decoder.end_utt()
        if self.warmup_left > 0:
            self.warmup_left -= 1
            self.decoder.start_utt()
            self.decoder.process_raw(b"".join(self._audio), False, True)
            self.decoder.end_utt()
            self._audio = []
        self.in_utterance = False
        return self.partial()


@dataclass
class ListeningPipeline:
    """Audio blocks in; VAD events and hypotheses out, for a live mic and a file alike (`push`'s `arrival`: when
    the block arrived, for each hypothesis's audio age; default now)."""

    vad: VoiceActivityDetector = field(default_factory=VoiceActivityDetector)
    recognizer: CommandRecognizer = field(default_factory=CommandRecognizer)
    preroll_ms: int = 256  # audio kept from before the VAD onset so the first phoneme is not cut
    partial_every_ms: int = 96  # how often a partial hypothesis is asked for
    max_utterance_ms: int = 6000  # force a final result on endless "speech" (music, a stuck VAD)
    settle_ms: int = COMMAND_PAUSE_MS  # quiet this long in speech: a settled partial, before the VAD's end (0: none)
    min_coverage: float = 0.85  # a phrase whose words span less of the loud audio is not a command (see coverage)

    def __post_init__(self):
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, self.preroll_ms // WINDOW_MS))
        self._utterance, self._since_partial_ms, self._last_partial, self._speech_start_ms = 0, 0.0, "", 0.0

    def push(self, block: np.ndarray, arrival: float | None = None) -> list[OnsetEvent | VadEvent | Hypothesis]:
        arrival = time.monotonic() if arrival is None else arrival
        frames: list[OnsetEvent | VadEvent | Hypothesis] = []
        for w in self.vad.process(block):
            # onset: tentative (SpeechOnset / OnsetRejected), for a barge-in's reversible pause; a SpeechStopped
            # after an UtteranceCut still goes out: listeners need it
            frames.extend(e for e in (w.onset, w.event) if e is not None)
            if isinstance(w.event, SpeechStarted):
                self._begin(w.event)
            if not self.recognizer.in_utterance:
                self._preroll.append(w.samples)
                continue
            self.recognizer.feed(w.samples)
            self._since_partial_ms += float(WINDOW_MS)
            if isinstance(w.event, SpeechStopped):
                frames.extend(self._hypothesis(w.end_ms, arrival, w.event.t_ms))
            elif w.end_ms - self._speech_start_ms >= self.max_utterance_ms:
                frames.append(UtteranceCut(w.end_ms, self._speech_start_ms, float(self.max_utterance_ms)))
                frames.extend(self._hypothesis(w.end_ms, arrival, w.end_ms))
            elif self.settle_ms and w.quiet_ms >= self.settle_ms > w.quiet_ms - WINDOW_MS and self.recognizer.warmed_up:
                frames.extend(self._hypothesis(w.end_ms, arrival, settled=True))
            elif self._since_partial_ms >= self.partial_every_ms:
                frames.extend(self._hypothesis(w.end_ms, arrival))
        return frames

    def reset(self) -> None:
        """Forget the stream so far (the microphone went away): no open utterance, fresh VAD state."""
        if self.recognizer.in_utterance:
            self.recognizer.finish()
        self.vad.reset()
        self._preroll.clear()
        self._last_partial = ""

    def flush(self) -> list[Hypothesis]:
        """End of stream: finish an open utterance (a file that ends mid-speech)."""
        if not self.recognizer.in_utterance:
            return []
        return self._hypothesis(self.vad.stream_ms, time.monotonic(), self.vad.stream_ms)

    def _begin(self, event: SpeechStarted) -> None:
        self._utterance += 1
        self._speech_start_ms, self._since_partial_ms, self._last_partial = event.t_ms, 0.0, ""
        self.recognizer.start()
        for chunk in self._preroll:
            self.recognizer.feed(chunk)
        self._preroll.clear()

    def _hypothesis(self, t_ms: float, arrival: float, speech_end_ms: float | None = None, *,
                    settled: bool = False) -> list[Hypothesis]:
        """A new partial hypothesis, if any (a settled one even when unchanged); with speech_end_ms, the utterance
        ends: its final, if any."""
        final = speech_end_ms is not None
        text = self.recognizer.finish() if final else self.recognizer.partial()
        self._since_partial_ms = 0.0
        if not text or (text == self._last_partial and not (final or settled)):
            return []
        self._last_partial = text
        coverage = self.recognizer.coverage()
        command = command_for(text) if coverage >= self.min_coverage else None
        return [Hypothesis(text, command, final, t_ms, (time.monotonic() - arrival) * 1000.0, self._utterance,
                           self._speech_start_ms, speech_end_ms, settled, coverage)]

    def run(self, samples: np.ndarray, block: int = 512) -> list[OnsetEvent | VadEvent | Hypothesis]:
        """Push a whole 16 kHz array block by block (faster than real time) and flush."""
        return [f for i in range(0, len(samples), block) for f in self.push(samples[i : i + block])] + self.flush()


class StablePrefix:
    """Which part of a stream of partial hypotheses may be committed: a word prefix the last `agreement` ones
    share, or a final; a later hypothesis that revises a stable word takes it back."""

    def __init__(self, agreement: int = 2):
        self.agreement = agreement
        self.reset()

    def reset(self) -> None:
        self._recent: deque[list[str]] = deque(maxlen=self.agreement)
        self.stable_words: list[str] = []
        self.final = False

    def update(self, text: str, final: bool = False, settled: bool = False) -> None:
        """settled: the speaker paused after `text`, so all of it is stable (and committable, if a whole phrase no
        other phrase extends)."""
        words = normalize(text).split()
        if self.final:  # a new utterance after a final result
            self.reset()
        self._recent.append(words)
        if final or settled:
            new_stable = words
        elif len(self._recent) < self.agreement:
            new_stable = commonprefix([self.stable_words, words])
        else:
            new_stable = commonprefix(list(self._recent))
            # never un-commit words still agreed by the newest hypothesis unless it revised them
            if len(new_stable) < len(self.stable_words) and words[: len(self.stable_words)] == self.stable_words:
                new_stable = self.stable_words
        self.stable_words, self.final = list(new_stable), final

    @property
    def committable_command(self) -> str | None:
        """A command that may be acted on now: final, or a stable whole phrase no other phrase extends."""
        text = " ".join(self.stable_words)
        command = command_for(text)
        if command is None or self.final:
            return command
        return None if any(p.startswith(text + " ") for p in PHRASES) else command
