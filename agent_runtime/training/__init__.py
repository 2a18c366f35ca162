"""Imitation of the lag-aware expert on the runtime's own states: data collection (DAgger) and its format."""
