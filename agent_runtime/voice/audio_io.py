"""Audio in and out behind sounddevice's callback interface, so the voice pipeline cannot tell a sound card from a
WAV file or an array (ArrayMicrophone and RecordingSpeaker run as fast as they are pumped).
"""

from pathlib import Path
from types import SimpleNamespace as CallbackTime  # for sounddevice's CData `time` argument (stream seconds)
from typing import Callable

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.optional import require

SAMPLE_RATE = 16_000  # what the VAD and the recognizer consume
BLOCK_FRAMES = 512  # 32 ms at 16 kHz: one silero window, the input block size

AudioCallback = Callable[[np.ndarray, int, object, object], None]


class NoAudioDeviceError(UserError):
    """No usable sound device; the message lists the devices that were found."""


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """A WAV (PCM or float; or another format libsndfile reads) as float32 mono in [-1, 1] (channels averaged) and
    its rate; UserError if missing, not audio or empty."""
    soundfile = require("soundfile", "voice")
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    try:
        x, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except soundfile.LibsndfileError as e:
        raise UserError(f"{path} is not a WAV file ({e.error_string.rstrip('.')}); convert it with e.g. "
                        f"`ffmpeg -i IN -ac 1 OUT.wav`") from None
    if x.size == 0:
        raise UserError(f"{path} contains no audio samples")
    return x.mean(axis=1, dtype=np.float32), rate


def resample(x: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Band-limited resampling (soxr, its high quality setting): downsampling does not alias."""
    x = np.asarray(x, np.float32)
    return x.copy() if src_rate == dst_rate or x.size == 0 else require("soxr", "voice").resample(x, src_rate, dst_rate)


def load_audio_16k(path: str | Path) -> np.ndarray:
    """Any common-rate mono/stereo WAV as 16 kHz mono float32: what the listening pipeline wants."""
    return resample(*read_wav(path), SAMPLE_RATE)


class _DeviceFreeStream:
    """The part of a sounddevice stream's interface the device guard uses (start, stop, close, `active`); `connect`
    is how VoiceIO opens one made beforehand (an opener: callback in, stream out)."""

    active = False
    callback = None

    def connect(self, callback):
        self.callback = callback
        return self

    def start(self) -> None:
        self.active = True

    def stop(self) -> None:
        self.active = False

    abort = close = stop


class ArrayMicrophone(_DeviceFreeStream):
    """A microphone that plays back an array block by block into an input callback (`pump()`: all at once)."""

    def __init__(self, samples: np.ndarray, callback: AudioCallback, blocksize: int = BLOCK_FRAMES,
                 samplerate: int = SAMPLE_RATE):
        self.samples = np.asarray(samples, np.float32).reshape(-1)
        self.callback, self.blocksize, self.samplerate = callback, blocksize, samplerate
        self.position = 0

    @property
    def finished(self) -> bool:
        return self.position >= self.samples.size

    def pump(self, n_blocks: int | None = None) -> int:
        """Deliver up to n_blocks blocks (all when None); the last block is zero-padded. Returns blocks sent."""
        sent = 0
        while not self.finished and (n_blocks is None or sent < n_blocks):
            t = self.position / self.samplerate
            block = self._next_block()
            self.callback(block.reshape(-1, 1), self.blocksize, CallbackTime(inputBufferAdcTime=t, currentTime=t), None)
            sent += 1
        return sent

    def _next_block(self) -> np.ndarray:
        """The block at `position` (the last one zero-padded); advances `position`."""
        block = self.samples[self.position : self.position + self.blocksize]
        self.position += self.blocksize
        return np.pad(block, (0, self.blocksize - block.size))


class RecordingSpeaker(_DeviceFreeStream):
    """A speaker that pulls blocks from an output callback and keeps them, for tests and files."""

    def __init__(self, callback: AudioCallback, blocksize: int = 1024, samplerate: int = 22_050):
        self.callback, self.blocksize, self.samplerate = callback, blocksize, samplerate
        self.blocks: list[np.ndarray] = []
        self.frames = 0  # pulled so far: the stream time of the next block

    def pull(self, n_blocks: int = 1) -> list:
        """Ask the callback for n blocks, as the sound card would; returns what `_keep` kept of them."""
        new = []
        for _ in range(n_blocks):
            out, t = np.zeros((self.blocksize, 1), np.float32), self.frames / self.samplerate
            self.callback(out, self.blocksize, CallbackTime(outputBufferDacTime=t, currentTime=t), None)
            self.frames += self.blocksize
            new.append(self._keep(out, t))
        return new

    def _keep(self, out: np.ndarray, t: float):
        self.blocks.append(out[:, 0].copy())
        return self.blocks[-1]


def _sounddevice():
    try:
        import sounddevice as sd
    except OSError as e:  # libportaudio2 missing
        raise NoAudioDeviceError(f"PortAudio is not available ({e}); install the Debian package libportaudio2") from None
    return sd


def _devices() -> list[dict]:
    return [dict(d) for d in _sounddevice().query_devices()]


def describe_devices() -> str:
    """The devices PortAudio found, for the error messages that say why none could be used."""
    return "; ".join(f"[{i}] {d['name']} (in {d['max_input_channels']}, out {d['max_output_channels']})"
                     for i, d in enumerate(_devices())) or "no audio devices found"


def open_stream(kind: str, callback: AudioCallback, device: int | str | None = None, samplerate: int = SAMPLE_RATE,
                blocksize: int = BLOCK_FRAMES):
    """A mono float32 sounddevice stream on `device` (None: the default, else the first usable one): "input" drives
    `callback` (the microphone), "output" pulls from it (the speaker). NoAudioDeviceError when there is none."""
    sd = _sounddevice()
    index, stream = (0, sd.InputStream) if kind == "input" else (1, sd.OutputStream)  # in sd.default.device
    usable = [i for i, d in enumerate(_devices()) if d[f"max_{kind}_channels"] > 0]
    if not usable:
        raise NoAudioDeviceError(f"no {kind} audio device; devices found: {describe_devices()}. "
                                 f"Use a WAV file instead (e.g. `agent-runtime transcribe FILE.wav`).")
    if device is None:
        default = sd.default.device[index]
        device = default if default is not None and default >= 0 else usable[0]
    try:
        return stream(device=device, channels=1, samplerate=samplerate, blocksize=blocksize, dtype="float32",
                      callback=callback)
    except sd.PortAudioError as e:
        raise NoAudioDeviceError(f"cannot open {kind} device {device!r}: {e}; "
                                 f"devices found: {describe_devices()}") from None


def refresh_devices() -> None:
    """Make PortAudio list the devices again (it lists them once, when it starts), so a headset plugged back in is
    found; only while no stream is open (the device guard calls it when every device is lost)."""
    sd = _sounddevice()
    sd._terminate()
    sd._initialize()
