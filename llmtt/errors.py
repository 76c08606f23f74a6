"""The one family of errors that mean "the user must fix something".

An agent that fails, times out or scores badly is a result, never one of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class LlmttError(Exception):
    """A user's mistake or a missing prerequisite; its message names the fix."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in one file: where it is and what was expected."""

    file: Path | None
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = str(self.file) if self.file else "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            return f"{where}: {self.field}: {self.message}"
        return f"{where}: {self.message}"


@dataclass
class ConfigError(LlmttError):
    """One or more problems found while loading a project's files."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def one(
        cls, file: Path | None, message: str, *, line: int | None = None, field: str | None = None
    ) -> ConfigError:
        """Build an error that holds a single problem."""
        return cls([Problem(file, line, field, message)])
