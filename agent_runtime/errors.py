"""User-facing errors: the CLI prints their message on one line and exits 2."""


class UserError(Exception):
    """Bad input from the user (flag, config, path). The message says what is wrong and what to do."""


class CapacityError(UserError):
    """A fixed-size resource (the KV block store) is exhausted."""


def first_line(e: BaseException) -> str:
    """An exception's message cut to its first line (its type's name when it has none), for one-line errors."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
