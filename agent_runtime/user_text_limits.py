"""How much user text the agent takes in: bounded, so a flood of typing or one endless line cannot fill the KV pool.

Texts cut to MAX_USER_TOKENS, at most MAX_PENDING_USER_TEXTS waiting, and the views' newest `user_blocks` bound
user text to (user_blocks + 1) blocks of MAX_USER_TOKENS; what is cut or dropped is an event and, once, a line.
"""

from __future__ import annotations

MAX_USER_TOKENS = 256  # a command is a few tokens; a paragraph of instructions still fits
MAX_PENDING_USER_TEXTS = 4  # texts waiting for prefill; older ones are dropped when more arrive
MAX_USER_TEXT_CHARS = 4096  # read or tokenized at most: well over MAX_USER_TOKENS tokens of ordinary text
MAX_PENDING_TYPED_LINES = 16  # typed lines waiting for the engine loop

