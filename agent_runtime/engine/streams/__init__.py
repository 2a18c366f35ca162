"""The engine's streams, one type: frames, user and heard text, Thinker, action, commentary (see stream.py)."""
