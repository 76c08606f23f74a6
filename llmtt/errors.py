"""The one family of errors that mean "the user must fix something".

An agent that fails, times out or scores badly is a result, never one of these.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path

# The disk, or the user's quota on it, is full.
_FULL = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL = 13  # SQLite's "database or disk is full" (SQLITE_FULL)
# SQLite's "file is not a database" and "database disk image is malformed".
_SQLITE_DAMAGED = (26, 11)  # SQLITE_NOTADB, SQLITE_CORRUPT


class LlmttError(Exception):
    """A user's mistake or a missing prerequisite; its message names the fix."""


class NoSpace(LlmttError):
    """A write that found the disk (or the quota) full: nothing is damaged, space is missing."""

    def __init__(self, path: object) -> None:
        super().__init__(f"no space left on device writing {path}: free some space and run again")


def no_space(exc: BaseException, path: object = None) -> NoSpace | None:
    """`exc` as a NoSpace when it says the disk is full, else None: an OSError with ENOSPC or
    EDQUOT (naming its own file, else `path`), or SQLite's "database or disk is full" (`path`:
    the database's file)."""
    if isinstance(exc, NoSpace):
        return exc
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return NoSpace(exc.filename or path or "a file")
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return NoSpace(path or "a database")
    return None


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


def damaged_database(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's word that a database file is damaged (not a database, or
    malformed), rather than that it could not be reached or written."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _SQLITE_DAMAGED
