"""Sessions: the one loop, clocks, time bounds, interruptions, events, worlds, the runtime, episodes."""
