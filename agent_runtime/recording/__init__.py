"""Recordings: a directory per session (manifest, append-only event log, ViZDoom .lmp, audio WAVs) and tools
that replay, check, re-run, plot and film it."""

from agent_runtime.recording.event_log import EventLogWriter, read_event_log
from agent_runtime.recording.manifest import FORMAT_VERSION, Manifest
from agent_runtime.recording.recording import Recording, RecordingWriter, default_recording_dir, screen_hash
from agent_runtime.recording.wav_writer import WavWriter

__all__ = [
    "FORMAT_VERSION", "EventLogWriter", "Manifest", "Recording", "RecordingWriter",
    "WavWriter", "default_recording_dir", "read_event_log", "screen_hash",
]
