"""An agent CLI's JSON-lines stream read into llmtt's events: the parser every adapter extends
(usage per model request as the stream shows it, the agent's own totals, tool calls in the order
the model issued them), the line buffer that keeps a very long line's head and tail, and readers
of fields that never fail on a value of another shape."""

from __future__ import annotations

import json
import math
import re
import shlex
from abc import abstractmethod
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from llmtt.agents.pricing import Pricing, Tokens
from llmtt.events import MAX_TEXT, UNREAD, EventWriter
from llmtt.util.text import strip_ansi

# Control characters left once the sequences are gone, e.g. the shift-in (\x0f) of a terminal
# reset that claude-code prints as it exits: not the agent's output.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# json.loads without its wrapper: (the value, where it ends); the caller checks the end.
_DECODE = json.JSONDecoder().raw_decode


# What reading a record of an unexpected shape can raise.
_UNREADABLE = (
    AttributeError,
    TypeError,
    KeyError,
    IndexError,
    ValueError,
    OverflowError,
    RecursionError,
)


class StreamParser:
    """Turns one agent's JSON lines into llmtt events, as they arrive.

    An adapter calls `request()` when it sees a model request of the agent loop begin,
    `usage()` once per request with its figures (the run's turns are these events), `total()`
    with the agent's own figures for the whole run, and `called()` / `answered()` for the tool
    calls, so that the harness can tell when the agent is about to make its next request
    (`settled`) and stop it at the turn limit.
    """

    def __init__(self, events: EventWriter, pricing: Pricing) -> None:
        self.events = events
        self.pricing = pricing
        self.turns = 0  # per-request usage events emitted
        self.requests = 0  # model requests seen begun (ahead of `turns` while one streams)
        self.per_request = True  # False: the agent reported no per-request usage
        self.natural_stop: bool | None = None
        self.reason: str | None = None  # why the agent stopped early, as it says
        self.turn_limit_hit = False  # the agent stopped itself at its own turn limit
        self._requests_cost: float | None = 0.0  # known cost of the requests since the last total
        self._totals_cost: float | None = 0.0
        self._side_cost: float | None = 0.0  # side requests: never part of a total
        self._open: set[str] = set()  # calls of the latest request that have no result yet
        self._called = False  # the latest request called a tool
        self._own_line = type(self).line is not StreamParser.line
        self._objects = 0  # JSON objects of the stream read

    def take(self, raw: bytes | bytearray, *, cut: bool = False) -> None:
        """One line of the agent's output as it came (without its "\\n"), JSON or not.

        Most lines are one JSON object in UTF-8, read here straight from their bytes by
        pydantic's own JSON parser, in about half the time of decoding the text and then its
        JSON. That parser is stricter than Python's json (no lone half of a UTF-16 pair, no
        bytes that are not UTF-8, 200 levels of nesting at most) and allows only JSON's own
        whitespace around the object: what it refuses goes to `line`, which reads it as
        before, so a line means the same either way. A parser with a `line` of its own (a
        plugin's, or one that reads nothing) gets every line there.

        A `cut` line is what LineBuffer kept of one too long to hold: its head and tail. When
        they do not make one JSON object, the log says that the line was not read.
        """
        if self._own_line:
            self.line(raw.decode("utf-8", errors="replace"))
            return
        json_like = raw[:1] == b"{" or raw.lstrip()[:1] == b"{"
        if json_like:
            try:
                value = from_json(raw)
            except ValueError:
                pass
            else:
                if type(value) is dict:  # noqa: E721 - always, from a text starting with "{"
                    self._read(value, raw)
                    return
        objects = self._objects
        self.line(raw.decode("utf-8", errors="replace"))
        if cut and json_like and self._objects == objects:
            self.unread(
                "a line of the agent's stream, too long to hold whole,",
                "what was kept of it is not one JSON object",
            )

    def line(self, text: str) -> None:
        """One line of the agent's output as text (JSON or not)."""
        # Strict JSON holds no control character outside its whitespace, so no terminal
        # sequence either: a line that decodes whole as it is needs no cleaning, and only the
        # other lines pay for the look at their characters.
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value, end = _DECODE(stripped)
            except (ValueError, RecursionError):  # nested too deep for Python's json: text
                end = -1
            if end == len(stripped) and isinstance(value, dict):
                self._read(value, stripped)
                return
        # The terminal's "\r" before "\n" aside, one C-speed look says whether to clean it.
        text = text[:-1] if text.endswith("\r") else text
        text = text.strip() if text.isprintable() else _CONTROL.sub("", strip_ansi(text)).strip()
        if not text:
            return
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                self._read(value, text)
                return
        self.events.emit("output", text=text)

    def _read(self, obj: dict[str, Any], line: str | bytes | bytearray) -> None:
        self._objects += 1
        self.safely(self.handle, obj, line, "a line of the agent's stream")

    def safely(
        self,
        read: Callable[[dict[str, Any]], None],
        obj: dict[str, Any],
        line: str | bytes | bytearray | None,
        what: str,
    ) -> None:
        """`read(obj)`, for a record of a shape the adapter does not expect (a field of another
        type, after an update of the CLI): the run goes on and its log says what was not
        read, with the record's `line` (its JSON when None). An agent's odd line is part of
        its result, never the end of a paid run."""
        try:
            read(obj)
        except _UNREADABLE as exc:
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            self.unread(what, why, json_text(obj) if line is None else line)

    def unread(self, what: str, why: str, line: str | bytes | bytearray = "") -> None:
        """Say in the log that `what` (shown by the head of its `line`) was not read, and why:
        the evaluation warns of the run (docs/metrics.md)."""
        head = line[:500]
        shown = head if isinstance(head, str) else head.decode("utf-8", errors="replace")
        self.events.emit(
            "output",
            text=f"llmtt: {what} {UNREAD} ({why}); events it held may be missing"
            + (f": {shown}" if shown else ""),
        )

    @abstractmethod
    def handle(self, obj: dict[str, Any]) -> None:
        """One JSON object of the agent's stream."""

    def poll(self) -> None:
        """Look at what the agent wrote elsewhere (asked often while it runs, and at its end)."""

    def finish(self) -> None:
        """Called once after the process ended: emit what only the end reveals."""

    @property
    def spent(self) -> float | None:
        """The run's cost so far from known prices (totals replacing the requests they cover);
        None when a cost is unknown."""
        known = (self._totals_cost, self._requests_cost, self._side_cost)
        if None in known:
            return None
        return sum(cost or 0.0 for cost in known)

    @property
    def settled(self) -> bool:
        """The latest request called tools and every one has its result: the agent's next act
        is another request."""
        return self._called and not self._open

    @property
    def open_calls(self) -> frozenset[str]:
        """The latest request's calls still without their result."""
        return frozenset(self._open)

    def request(self) -> None:
        """A model request of the agent loop began."""
        self.requests += 1
        self._open.clear()
        self._called = False

    def called(self, call_id: str) -> None:
        """The latest request called a tool."""
        self._open.add(call_id)
        self._called = True

    def answered(self, call_id: str) -> None:
        """A tool call got its result."""
        self._open.discard(call_id)

    def usage(self, tokens: Tokens, client_cost: Any = None, *, side: bool = False) -> None:
        """One model request's usage event; a request of the loop is a turn."""
        cost = self._emit(tokens, client_cost, side=side)
        if side:
            self._side_cost = _plus(self._side_cost, cost)
        else:
            self.turns += 1
            self._requests_cost = _plus(self._requests_cost, cost)

    def total(self, tokens: Tokens, client_cost: Any = None) -> None:
        """The agent's own figures for the loop's requests of the whole run: they replace the
        per-request events before them (side requests stay apart)."""
        cost = self._emit(tokens, client_cost, total=True)
        self._totals_cost = _plus(self._totals_cost, cost)
        self._requests_cost = 0.0

    def _emit(self, tokens: Tokens, client_cost: Any, **flags: bool) -> float | None:
        cost = self.pricing.cost(tokens)
        fields: dict[str, Any] = {**tokens.fields(), "cost_usd": cost}
        if cost is not None:
            fields["cost_source"] = self.pricing.source
        if isinstance(client_cost, int | float) and not isinstance(client_cost, bool):
            said = float(client_cost) if abs(client_cost) < 1e300 else math.inf
            if math.isfinite(said):  # a cost the client could not have meant is left out
                fields["client_cost_usd"] = said
        fields.update({name: True for name, on in flags.items() if on})
        self.events.emit("usage", **fields)
        return cost


# More tokens than any request can hold: a figure past it is read as this many (a cost too large
# to miss, which stops a run that has limits), never as an overflow or an infinite cost.
MAX_TOKENS = 10**12


def figure(source: Any, name: str) -> int:
    """A token figure from a JSON object: its number under `name`, else 0 (for anything that
    is not a count: a text, a negative number, NaN), at most MAX_TOKENS."""
    value = source.get(name) if isinstance(source, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return 0
    return MAX_TOKENS if value >= MAX_TOKENS else int(value)


def whole(value: Any) -> int | None:
    """An exit code from a JSON value: a whole number (not `true`), else None (unknown)."""
    return value if type(value) is int else None


def json_text(value: Any) -> str:
    """`value` as JSON text, for an event; a value nested too deep for Python's json to write
    is said to be so."""
    try:
        return json.dumps(value)
    except (RecursionError, ValueError):
        return "(a JSON value nested too deep to show)"


def mapping(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one: a field of an agent's stream may come
    in another shape than the recordings show (a new version of the CLI)."""
    return value if isinstance(value, dict) else {}


def listing(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one (see `mapping`)."""
    return value if isinstance(value, list) else []


def _plus(spent: float | None, cost: float | None) -> float | None:
    return None if spent is None or cost is None else spent + cost


# One line of an agent's output is read whole up to this size (a 16 MB tool result is). Of a
# longer one (a CLI printing a blob without a newline) only its first and last KEPT_OF_LINE
# bytes are held, with a marker between them: the harness's memory stays bounded whatever the
# agent prints, and the event it makes still fits in an event's text (MAX_TEXT) whole.
MAX_LINE = 32 * 1024 * 1024


KEPT_OF_LINE = MAX_TEXT // 2 - 100  # the marker between head and tail fits in the 200 left


class LineBuffer:
    """Splits raw PTY bytes into lines (tolerating `\\r\\n` and partial chunks)."""

    def __init__(self, parser: StreamParser) -> None:
        self._parser = parser
        # The unterminated line's pieces: a long line is joined once, when it ends, and only
        # the new piece is searched for its end (linear in the line, not quadratic).
        self._pending: deque[bytes] = deque()
        self._size = 0  # bytes in _pending
        self._head: bytes | None = None  # a line past MAX_LINE: its first bytes, ...
        self._cut = 0  # ... how many bytes after them are gone, ...
        self._run = 0  # ... and how many backslashes end what is gone (or the head)

    def feed(self, data: bytes) -> None:
        """Take a chunk; complete lines go to the parser, and the events they make reach the
        file when the chunk is done."""
        end = data.find(b"\n")
        if end < 0:
            self._add(data)
            return
        self._add(data[:end])
        with self._parser.events.held():
            self._send()
            *lines, rest = data[end + 1 :].split(b"\n")
            for line in lines:
                self._parser.take(line)
        self._add(rest)

    def flush(self) -> None:
        """The last, unterminated line."""
        if self._pending or self._head is not None:
            self._send()

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._pending.append(piece)
        self._size += len(piece)
        if self._head is None and self._size > MAX_LINE:
            self._keep_head()
        if self._head is not None:
            pending = self._pending
            while len(pending) > 1 and self._size - len(pending[0]) >= KEPT_OF_LINE:
                self._size -= len(pending[0])
                self._drop(pending.popleft())

    def _keep_head(self) -> None:
        """The line's first KEPT_OF_LINE bytes, not ending inside a JSON escape."""
        taken: list[bytes] = []
        size = 0
        while size < KEPT_OF_LINE:
            taken.append(self._pending.popleft())
            size += len(taken[-1])
        head = b"".join(taken)
        self._pending.appendleft(head[KEPT_OF_LINE:])
        head = head[:KEPT_OF_LINE]
        self._size -= KEPT_OF_LINE
        self._head = _before_escape(head)
        self._cut = len(head) - len(self._head)
        self._run = len(head) - len(head.rstrip(b"\\"))

    def _drop(self, gone: bytes) -> None:
        """Let go of bytes that came after the head."""
        left = len(gone.rstrip(b"\\"))
        self._run = self._run + len(gone) if left == 0 else len(gone) - left
        self._cut += len(gone)

    def _send(self) -> None:
        """The line held to the parser, and let go of here."""
        line = b"".join(self._pending)
        self._pending.clear()
        self._size = 0
        if self._head is None:
            self._parser.take(line)
            return
        extra = max(0, len(line) - KEPT_OF_LINE)
        if extra:
            self._drop(line[:extra])
        # Nor does the tail start with what a backslash before it escaped (a `"` that would
        # end the string): an odd run of backslashes before it escapes its first byte.
        start = extra + self._run % 2
        marker = b" [... %d bytes of this line cut by llmtt ...] " % (self._cut + start - extra)
        kept = self._head + marker + line[start:]
        self._head, self._cut, self._run = None, 0, 0
        self._parser.take(kept, cut=True)


def _before_escape(head: bytes) -> bytes:
    """`head` without an escape of a JSON string that may be cut at its end (`\\u00e`), nor
    the run of backslashes before it: the marker after it would make the line unreadable."""
    escape = head.find(b"\\", len(head) - 6)
    if escape < 0:
        return head
    while escape > 0 and head[escape - 1 : escape] == b"\\":
        escape -= 1
    return head[:escape]


def unwrap_shell(command: str) -> str:
    """`/bin/bash -lc 'git init'` -> `git init`: the command the model asked for."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    shells = ("bash", "sh", "zsh", "dash")
    if len(argv) == 3 and Path(argv[0]).name in shells and argv[1] in ("-c", "-lc", "-ic"):
        return argv[2]
    return command
