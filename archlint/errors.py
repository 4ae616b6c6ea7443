"""Errors that end a run with exit code 2 and one line for the user."""


class UsageError(Exception):
    """Bad input from the user (target, flags, config, shapes). Message: what is wrong, what to do."""
