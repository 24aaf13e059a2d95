"""Errors a user can act on. The CLI turns them into exit status 2 and one line."""


class ESError(Exception):
    """Bad input: a wrong setting, an unknown environment, a broken file.

    The message is one line that says what is wrong and, where possible, what to do.
    """
