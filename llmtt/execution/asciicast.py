"""A run's terminal session as an asciicast v2 recording (`session.cast`), beside its transcript.

asciicast v2 (asciinema's format, docs.asciinema.org/manual/asciicast/v2/): a first line holding
a JSON header `{"version": 2, "width", "height", "timestamp"}`, then one JSON array a line,
`[seconds since the start, "o", text]`, for what the terminal was sent. Everything the agent's
transcript takes is recorded: the PTY's output of a CLI agent, and the `$ command` lines and
outputs that the oracle and the litellm loop write themselves (so an agent that runs no PTY
still has its session). asciinema plays it, and so does the run's panel in report.html.

What is recorded is cut at line ends (and carriage returns), a line longer than LONGEST_PIECE
where no secret spans the cut, and each piece passes the run's redactor: a secret is masked
whole, as in the event log, and the file
can be shown where the transcript, kept raw, cannot. Lines end as a terminal shows them: a bare
newline that llmtt or a pipe wrote becomes CR LF, as the PTY's own line discipline makes it.
The recording is bounded like the transcript: past about MAX_CAST bytes, its first and last
halves stay, with a line between them saying how many characters were cut.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from llmtt.process.pty import DIMENSIONS
from llmtt.util.text import Masks

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

CAST_FILE = "session.cast"
# Bytes of recorded text kept: the first and last 2 MiB (its end is held in memory until the
# session ends; the transcript keeps 32 MiB, and the report plays the last 8 KiB).
MAX_CAST = 4 * 1024 * 1024
LONGEST_PIECE = 16_384  # characters of one line held before they are recorded anyway
OVERLAP = 256  # characters either side of a cut inside a line that a secret may span
_LINE_COST = len('[1234.123456, "o", ""]\n')  # what a line adds to its text
_BARE_LF = re.compile(r"(?<!\r)\n")


class Recorder:
    """Writes one run's asciicast to `<path>.part` as the session runs; `close()` renames it to
    `path`, so an unfinished recording never looks like a finished one."""

    def __init__(self, path: Path, redact: Masks | None = None, limit: int = MAX_CAST) -> None:
        self.path = path
        self.part = path.with_name(path.name + ".part")
        # Redacted, like events.jsonl: it follows the umask as any report does.
        self._file = open(self.part, "wb")  # closed by close() or __exit__
        self._redact = redact
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = time.monotonic()
        self._pending = ""  # the line under way, recorded once it ends
        self._after_cr = False  # the text so far ended in a carriage return
        self._head = limit // 2  # bytes the head may still take
        self._keep = limit // 2
        # pieces past the head, not yet masked: (time, text, about its line's size)
        self._end: deque[tuple[float, str, int]] = deque()
        self._held = 0  # about the size of `_end`'s lines
        self._cut = 0
        self._last = 0.0
        rows, columns = DIMENSIONS
        header = {"version": 2, "width": columns, "height": rows, "timestamp": int(time.time())}
        self._file.write(json.dumps(header).encode() + b"\n")

    def add(self, data: bytes) -> None:
        """Record what the terminal was sent now."""
        text = self._decode.decode(data)
        if not text:
            return
        self._pending += self._crlf(text)
        self._pieces(final=False)

    def _pieces(self, final: bool) -> None:
        """The text pending recorded in pieces of at most about LONGEST_PIECE characters (one
        large write too: the recording stays bounded), cut at line ends where there are. A
        longer line is cut where no secret spans the cut, waiting for OVERLAP characters past
        it, so that each piece masked alone is masked as the whole would be. The rest of an
        unfinished line stays pending (`final`: recorded)."""
        text, at = self._pending, 0
        while len(text) - at > LONGEST_PIECE:
            stop = at + LONGEST_PIECE
            end = max(text.rfind("\n", at, stop), text.rfind("\r", at, stop))
            if end >= 0:
                cut = end + 1
            elif len(text) - stop < OVERLAP and not final:
                break  # the text after the cut is not here yet
            else:
                cut = self._safe_cut(text, at, stop)
            self._emit(text[at:cut])
            at = cut
        rest = text[at:]
        end = len(rest) - 1 if final else max(rest.rfind("\n"), rest.rfind("\r"))
        if end >= 0:
            self._emit(rest[: end + 1])
        self._pending = rest[end + 1 :]

    def _safe_cut(self, text: str, start: int, cut: int) -> int:
        """Where to cut `text` at `cut` or before it (after `start`), so that no secret of up
        to OVERLAP characters spans the cut: the text either side masked alone is masked as
        the two together are."""
        if self._redact is None:
            return cut
        mask = self._redact
        for _ in range(4):
            before, after = text[max(start, cut - OVERLAP) : cut], text[cut : cut + OVERLAP]
            if mask(before) + mask(after) == mask(before + after):
                return cut
            cut = max(start + 1, cut - OVERLAP)  # past the start of what spans it
        return cut

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Finished (`close`) when the session ended; else left as a part, which the next
        attempt removes."""
        if kind is None:
            self.close()
        else:
            self._file.close()

    def close(self) -> None:
        """Record the rest, then the cut and the end; the recording takes its final name."""
        if self._file.closed:
            return
        try:
            self._pending += self._crlf(self._decode.decode(b"", final=True))
            self._pieces(final=True)
            if self._cut:
                marker = f"\r\n[... {self._cut} characters of the session cut by llmtt ...]\r\n"
                self._file.write(self._line(self._end[0][0], marker))
            for at, text, _ in self._end:
                self._file.write(self._line(at, self._masked(text)))
            self._file.close()
            os.replace(self.part, self.path)
        finally:
            self._file.close()

    def _crlf(self, text: str) -> str:
        """Bare newlines made CR LF (a newline right after a CR, in this piece or at the end of
        the one before, stays)."""
        first = ""
        if self._after_cr and text.startswith("\n"):
            first, text = "\n", text[1:]
        self._after_cr = (first + text).endswith("\r")
        return first + _BARE_LF.sub("\r\n", text)

    def _emit(self, text: str) -> None:
        """One piece recorded: into the file while the head has room; else held with the end,
        masked only if it is kept (a command printing 100 MB costs no more than one printing
        the end's worth)."""
        self._last = round(time.monotonic() - self._started, 6)
        if self._head:
            line = self._line(self._last, self._masked(text))
            if self._head >= len(line):
                self._head -= len(line)
                self._file.write(line)
                self._file.flush()
                return
            self._head = 0
        size = len(text) + _LINE_COST  # about its line's size, not masked nor escaped yet
        self._end.append((self._last, text, size))
        self._held += size
        while self._held - self._end[0][2] >= self._keep:
            _, cut, size = self._end.popleft()
            self._held -= size
            self._cut += len(cut)

    def _masked(self, text: str) -> str:
        return self._redact.text(text) if self._redact is not None else text

    @staticmethod
    def _line(at: float, text: str) -> bytes:
        return json.dumps([at, "o", text], ensure_ascii=False).encode("utf-8", "replace") + b"\n"


class _Tee(io.RawIOBase):
    """Every write to a transcript also recorded."""

    def __init__(self, transcript: BinaryIO, recorder: Recorder) -> None:
        super().__init__()
        self._transcript = transcript
        self._recorder = recorder

    def writable(self) -> bool:
        """Yes: a transcript is only written."""
        return True

    def write(self, data: ReadableBuffer) -> int:
        """Both take all of `data`."""
        chunk = bytes(data)
        self._transcript.write(chunk)
        self._recorder.add(chunk)
        return len(chunk)

    def flush(self) -> None:
        """The transcript's own flush (the recording is flushed line by line)."""
        self._transcript.flush()


def recorded(transcript: BinaryIO, recorder: Recorder) -> BinaryIO:
    """`transcript` (open for writing bytes) with what is written to it also recorded; closing
    the result closes neither (their owner does)."""
    return io.BufferedWriter(_Tee(transcript, recorder), buffer_size=io.DEFAULT_BUFFER_SIZE)


def read_cast(path: Path, limit: int) -> dict[str, Any] | None:
    """A recording for the report: its size, and its events as `[seconds, text]`, those of its
    last `limit` bytes at most (the bytes left out are `cut`); None when there is no recording
    or it cannot be read."""
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline())
            start = handle.tell()
            size = os.fstat(handle.fileno()).st_size
            if size - start > limit:  # its end only: a recording may be 4 MiB
                handle.seek(size - limit)
                handle.readline()  # from a line's start
                if handle.tell() >= size:  # no line starts in the end: the last line, whole
                    handle.seek(_last_line(handle, start, size))
            cut = handle.tell() - start
            lines = handle.read().splitlines()
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("version") != 2:
        return None
    events: list[list[Any]] = []
    for line in lines:
        try:
            at, kind, text = json.loads(line)
        except (ValueError, TypeError):
            continue
        if kind == "o" and isinstance(text, str) and isinstance(at, int | float):
            events.append([at, text[-limit:]])  # of a long last line, its end
    return {
        "width": header.get("width"),
        "height": header.get("height"),
        "events": events,
        "cut": cut,
    }


LONGEST_LINE = 1024 * 1024  # bytes of a recording's last line read to play its end


def _last_line(handle: BinaryIO, start: int, size: int) -> int:
    """Where the recording's last line starts (a line of one long piece, which recordings
    before pieces were bounded could hold); past LONGEST_LINE, its end (no line: no events)."""
    at = size - 1  # its own line end left out
    while at > start and size - at < LONGEST_LINE:
        step = min(65536, at - start)
        handle.seek(at - step)
        found = handle.read(step).rfind(b"\n")
        if found >= 0:
            return at - step + found + 1
        at -= step
    return max(start, at)
