"""The one exception type for bad user input, shared by every room of the project.

It lives in `data/` because that is the bottom of the import arrow (data -> lightning_modules -> ablations ->
reports), so every other package may import it. The `ablate` command line prints it as one line and exits 2.
"""


class AblateError(Exception):
    """A problem with the user's input (file, field, row or value). The message names it and says what to do."""


class ConfigError(AblateError, ValueError):
    """An invalid configuration value. Also a ValueError, so library users can catch it the usual way."""


def did_you_mean(name: str, choices) -> str:
    """' (did you mean 'X'?)' for the choice closest to a mistyped `name` (difflib's ratio, 0.5 or more: row names are
    two characters, 'B9' to 'B1' is 0.5), else ''."""
    import difflib

    close = difflib.get_close_matches(name, [str(c) for c in choices], n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
