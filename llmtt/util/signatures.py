"""What a plan was built from: signatures of the files, folders and variables it read.

Loading a project (pydantic models, YAML with line maps, hashing every fixture) costs more than
doit's own work on a plan of a thousand runs. While a plan is built, every file, folder, program
search and environment variable it reads is noted here; the next invocation compares these
signatures (one `stat` each) and, when none moved, reuses the plan without loading anything.

A file's signature is its size, inode, mode and modification and change times (the change time
moves on any write, rename or chmod and cannot be set back). A file modified within
`SETTLE_SECS` of being noted could be written again within the same tick of the file system's
clock without moving its times, so a plan read from such a file is not cached ("racily clean",
as git puts it); an older modification time would move on the next write.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SETTLE_SECS = 2.0

Signature = list[int] | None


def signature(path: str | os.PathLike[str], follow: bool = True) -> Signature:
    """The signature of one file or folder, or None when there is nothing there."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return [info.st_size, info.st_ino, info.st_mode, info.st_mtime_ns, info.st_ctime_ns]


class Inputs:
    """The signatures noted while one plan was built."""

    def __init__(self) -> None:
        self.files: dict[str, Signature] = {}
        self.links: dict[str, Signature] = {}
        self.env: dict[str, str | None] = {}
        self.unsettled: str | None = None  # why the plan must not be reused

    def note_file(self, path: str | os.PathLike[str], follow: bool = True) -> None:
        """Note a file or folder read (or looked for: a missing one is noted as missing)."""
        key = os.path.abspath(path)
        found = signature(key, follow)
        (self.files if follow else self.links)[key] = found
        if (
            found is not None
            and self.unsettled is None
            and found[3] / 1e9 > time.time() - SETTLE_SECS
        ):
            self.unsettled = f"{key} changed less than {SETTLE_SECS:g} s ago"

    def note_env(self, name: str) -> None:
        """Note an environment variable read."""
        self.env[name] = os.environ.get(name)

    def note_search(self, search_path: str) -> None:
        """Note a program search along `search_path`: a program added to any of its folders
        changes the folder's times."""
        self.env["PATH"] = os.environ.get("PATH")
        for folder in search_path.split(os.pathsep):
            if folder:
                self.note_file(folder)

    def unsettle(self, why: str) -> None:
        """Something read cannot be signed (e.g. a command's output): never reuse this plan."""
        if self.unsettled is None:
            self.unsettled = why

    def to_json(self) -> dict[str, Any]:
        """The signatures, for the plan cache."""
        return {"files": self.files, "links": self.links, "env": self.env}

    @staticmethod
    def changed(saved: dict[str, Any]) -> str | None:
        """The first input that is no longer as `saved` noted it, or None when none moved."""
        for name, value in saved["env"].items():
            if os.environ.get(name) != value:
                return f"${name}"
        for kind, follow in (("files", True), ("links", False)):
            for path, sig in saved[kind].items():
                if signature(path, follow) != sig:
                    return str(path)
        return None


_current: Inputs | None = None


@contextmanager
def recording() -> Iterator[Inputs]:
    """Note every input read inside the block."""
    global _current
    outer, _current = _current, Inputs()
    try:
        yield _current
    finally:
        _current = outer


def note_file(path: str | os.PathLike[str] | Path, follow: bool = True) -> None:
    """Note a file or folder read, when a plan is being recorded."""
    if _current is not None:
        _current.note_file(path, follow)


def note_env(name: str) -> None:
    """Note an environment variable read, when a plan is being recorded."""
    if _current is not None:
        _current.note_env(name)


def note_search(search_path: str) -> None:
    """Note a program search along a PATH string, when a plan is being recorded."""
    if _current is not None:
        _current.note_search(search_path)


def unsettle(why: str) -> None:
    """Mark the plan being recorded as not reusable."""
    if _current is not None:
        _current.unsettle(why)


def which(program: str, search_path: str) -> str | None:
    """`shutil.which`, noting the search and what it found, when a plan is being recorded."""
    found = shutil.which(program, path=search_path)
    note_search(search_path)
    if found is not None:
        note_file(found)
    return found
