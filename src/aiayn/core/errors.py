"""Error types shared by the whole project.

Every error that aiayn raises because of bad input (files, configuration, checkpoints)
derives from :class:`AiaynError`, so the command line can print the message alone.
"""


class AiaynError(Exception):
    """Base of every error aiayn raises on bad input.

    The CLI prints its message without a traceback.
    """


class DataError(AiaynError, ValueError):
    """A corpus, data set or tokenizer file is missing, unreadable or malformed."""


class ConfigError(AiaynError, ValueError):
    """A configuration value is invalid."""


class CheckpointError(AiaynError, ValueError):
    """A checkpoint or model directory is bad or hostile."""


class TrainingError(AiaynError, RuntimeError):
    """Training cannot go on (e.g. too many consecutive non-finite steps)."""


class DecodingError(AiaynError, ValueError):
    """A decoding gave a score that is not a finite number (never printed: the options that led
    to it are named instead)."""


class RunDirInUseError(AiaynError, RuntimeError):
    """Another process is training into this run directory (it holds the directory's lock)."""


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its type name when it has none): a third-party
    error shown inside one of ours keeps the message to one line."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
