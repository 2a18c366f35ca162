"""User-facing errors: the CLI prints their message on one line and exits 2."""


class UserError(Exception):
    """Bad input from the user (flag, config, path). The message says what is wrong and what to do."""


class CapacityError(UserError):
    """A fixed-size resource (the KV block store) is exhausted."""
