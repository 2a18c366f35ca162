"""doom-agent-runtime: one language model that sees, thinks, acts and talks at once in ViZDoom."""

__version__ = "0.1.0"
