"""Atomic writes: a reader sees the old file or the whole new one, never half of one.

A file written here gets the mode any new file gets (0666 less the umask), like a report written
by any other tool; a `redact` given masks secrets in what is written (every human-readable
artifact of a run passes its project's redactor).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from llmtt.errors import LlmttError
from llmtt.util.text import Masks


def _umask() -> int:
    """The process's umask, read without setting it where Linux shows it (setting it to read it
    races with threads that create files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()


def write_text(path: Path, text: str, redact: Masks | None = None) -> None:
    """Write `text` to `path` through a temporary file in the same folder, then rename. A lone
    half of a UTF-16 pair (a JSON escape some clients write when they cut a text in the middle
    of an emoji) is not UTF-8: it is written as "?" rather than failing the write."""
    write_bytes(path, (redact(text) if redact else text).encode("utf-8", errors="replace"))


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600: right for a secret, not for a report
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a failed write names no file (a full disk: say which)
        raise


def open_private(path: Path, *, append: bool = False) -> BinaryIO:
    """A file only its owner may read, from its creation on, for what may hold secrets (a
    transcript, a model's request log); without `append`, a file already there is replaced
    (it would keep its mode)."""
    if not append:
        path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_EXCL)
    return os.fdopen(os.open(path, flags, 0o600), "ab" if append else "wb")


def write_json(
    path: Path, value: Any, redact: Masks | None = None, *, compact: bool = False
) -> None:
    """Write `value` as indented JSON (`compact`: on one line, for large machine-read files,
    several times faster to write), atomically (with every string in it redacted)."""
    if redact:
        value = redact.value(value)
    if compact:
        text = json.dumps(value, separators=(",", ":"), default=str)
    else:
        text = json.dumps(value, indent=2, sort_keys=False, default=str)
    write_text(path, text + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file; a damaged one is an LlmttError saying what to do."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        try:
            return json.load(handle)
        except ValueError as exc:
            raise _damaged(path, exc, None) from None


def read_jsonl(path: Path) -> list[Any]:
    """Every record of a JSON-lines file (events.jsonl, results.jsonl); a missing file has none.
    A damaged line is an LlmttError naming it."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise _damaged(path, exc, number) from None
    return records


def _damaged(path: Path, exc: ValueError, line: int | None) -> LlmttError:
    where = f"{path}:{line}" if line is not None else str(path)
    fix = (
        f"remove or mend line {line}"
        if line is not None
        else "remove it and run doit again: the layer that writes it runs again"
    )
    return LlmttError(f"{where}: damaged, not JSON ({exc}); {fix}")
