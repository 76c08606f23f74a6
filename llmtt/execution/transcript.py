"""A run's raw transcript (`transcript.raw.txt`), capped: what an agent prints past
MAX_TRANSCRIPT bytes leaves its first and last halves in the file, with a line between them that
says how many bytes were cut (an agent printing 1 GB left 964 MB a run).

Events are read from the agent's stream as it arrives, not from this file, so a cut costs no
event; each event's own text is capped apart (`llmtt.events.MAX_TEXT`). The head is written as
it comes; the end is held in memory until the agent is done.
"""

from __future__ import annotations

import io
from collections import deque
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

MAX_TRANSCRIPT = 32 * 1024 * 1024  # bytes of a transcript kept: its first and last 16 MiB


def capped(file: BinaryIO) -> BinaryIO:
    """`file` (opened for writing bytes) behind a writer that keeps MAX_TRANSCRIPT bytes of
    what is written to it; closing the writer writes the end and closes `file`."""
    return io.BufferedWriter(Capped(file, MAX_TRANSCRIPT))


class Capped(io.RawIOBase):
    """Writes the first `limit // 2` bytes through to `file` and holds the last `limit // 2`
    (or so) in memory; at close, the line saying what was cut, then the end."""

    def __init__(self, file: BinaryIO, limit: int) -> None:
        super().__init__()
        self._file = file
        self._head = limit // 2  # bytes the head may still take
        self._keep = limit // 2  # bytes of the end kept
        self._end: deque[bytes] = deque()
        self._held = 0  # bytes in `_end`
        self._cut = 0

    def writable(self) -> bool:
        """Yes: a transcript is only written."""
        return True

    def write(self, data: ReadableBuffer) -> int:
        """Take all of `data`: into the file while the head has room, else into the end."""
        chunk = bytes(data)
        size = len(chunk)
        if self._head:
            head = chunk[: self._head]
            self._file.write(head)
            self._head -= len(head)
            chunk = chunk[len(head) :]
        if chunk:
            self._end.append(chunk)
            self._held += len(chunk)
            # Whole chunks only: what is left holds at least `_keep` bytes.
            while self._held - len(self._end[0]) >= self._keep:
                self._held -= len(self._end[0])
                self._cut += len(self._end.popleft())
        return size

    def flush(self) -> None:
        """The head reaches the file; the end waits for the close."""
        self._file.flush()

    def close(self) -> None:
        """Write the end, after a line saying how many bytes were cut if any were; close."""
        if self.closed:
            return
        try:
            self._write_end()
        finally:
            try:
                super().close()  # flushes first
            finally:
                self._file.close()

    def _write_end(self) -> None:
        end = b"".join(self._end)
        self._end.clear()
        extra = len(end) - self._keep
        if extra > 0:
            self._cut += extra
            end = end[extra:]
        if self._cut:
            self._file.write(b"\n[... %d bytes of the transcript cut by llmtt ...]\n" % self._cut)
        self._file.write(end)
