"""How much user text the agent takes in: bounded, so a flood of typing or one endless line cannot fill the KV pool.

Each user text becomes a block of its own that the views read (`MultiStreamAgent.push_user_text`), and the views
keep only the newest `user_blocks` of them. Cutting every text to MAX_USER_TOKENS and letting at most
MAX_PENDING_USER_TEXTS wait for prefill bounds the pool's share of user text to (user_blocks + 1) blocks of
MAX_USER_TOKENS tokens, however much is typed; what is cut or dropped is an event and, once a session, a line.
"""

from __future__ import annotations

MAX_USER_TOKENS = 256  # a command is a few tokens; a paragraph of instructions still fits
MAX_PENDING_USER_TEXTS = 4  # texts waiting for prefill; older ones are dropped when more arrive
MAX_USER_TEXT_CHARS = 4096  # read or tokenized at most: well over MAX_USER_TOKENS tokens of ordinary text
MAX_PENDING_TYPED_LINES = 16  # typed lines waiting for the engine loop

