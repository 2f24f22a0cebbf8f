"""rlhp's error types: the CLI turns each into one clear line and its own exit code.

This module imports nothing, so every layer (data, envs, parts, commands) can raise them.
"""

from __future__ import annotations


class RlhpError(Exception):
    """Base of the errors rlhp reports as one line, without a traceback."""

    kind = "error"
    exit_code = 1


class ConfigError(RlhpError, ValueError):
    """A bad config value; the message names the key and how to fix it."""

    kind = "config error"
    exit_code = 2

    def __init__(self, key: str, problem: str, noun: str = "config key") -> None:
        super().__init__(f"{noun} `{key}` {problem}")
        self.key = key


class ArgumentError(RlhpError, ValueError):
    """A part's constructor refusing one of its own arguments; the builder names it by its full config key
    (``reward_trainer.epochs``), and outside a build it is a config error naming the argument alone."""

    kind = "config error"
    exit_code = 2

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"{argument} {problem}")
        self.argument, self.problem = argument, problem

    @classmethod
    def check_share(cls, argument: str, value: float) -> None:
        """Refuse ``value`` unless it lies in [0, 1] (a share or a probability)."""
        if not 0 <= value <= 1:
            raise cls(argument, f"must lie in [0, 1], got {value}")

    @classmethod
    def check_whole_count(cls, argument: str, value: int) -> None:
        """Refuse ``value`` unless it is a whole number (an int, not a bool or a float) of at least 1."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise cls(argument, f"must be a whole number, at least 1, got {value!r}")

    @classmethod
    def check_count(cls, argument: str, value: int) -> None:
        """Refuse ``value`` unless it is at least 1."""
        if value < 1:
            raise cls(argument, f"must be at least 1, got {value}")


class DataError(RlhpError):
    """A file or dataset that cannot be read, or does not fit the env (the message names the path)."""

    kind = "data error"
    exit_code = 3


class NetworkError(RlhpError):
    """A download or upload that failed (the message says what was kept and how to finish by hand)."""

    kind = "network error"
    exit_code = 4


class StorageError(RlhpError):
    """The run folder cannot be written: full disk, read-only or forbidden (the message names the path)."""

    kind = "storage error"
    exit_code = 6


class RunError(RlhpError):
    """A run that cannot go on, or whose result must not be kept (e.g. the quality gate)."""

    kind = "run error"
    exit_code = 5


class VariableHorizonError(RunError):
    """Terminal episodes of different lengths: their length would leak the reward."""


class DivergedError(RunError):
    """A NaN or infinite loss, reward or weight: training cannot go on from this state."""


class Stopped(RlhpError):
    """The run was asked to stop (SIGINT / SIGTERM) and saved what it had; ``exit_code`` follows the
    shell's 128 + signal convention (130 for Ctrl-C, 143 for SIGTERM)."""

    kind = "stopped"

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
