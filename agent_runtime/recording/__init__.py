"""Recordings: a directory per session (manifest, append-only event log, ViZDoom .lmp, audio WAVs) and tools
that replay, check, re-run, plot and film it."""
