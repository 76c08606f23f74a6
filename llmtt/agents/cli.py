"""What the real agent CLIs share: finding the binary, isolation, the run, the JSON-lines stream.

An adapter says how to launch its CLI (`command`) and how to read its stream (a `StreamParser`,
which emits the events docs/metrics.md describes: usage per model request as soon as the stream
shows it, the agent's own totals, tool calls in the order the model issued them); this module
runs it under the PTY runner, feeds the parser line by line as output arrives, stops the run at
its turn limit, cost limit or session budget (`Limits`), and closes the event log with how it
ended.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from llmtt.agents.base import Agent, AgentExit, RunContext, VersionProbe
from llmtt.agents.install import places
from llmtt.events import MAX_TEXT, UNREAD, EventWriter
from llmtt.process.pty import run_in_pty
from llmtt.process.shell import tool_path
from llmtt.providers import Endpoint, ResolvedModel, endpoint_of, resolve_model, toml_key
from llmtt.spec.config import ModelSpec
from llmtt.util import signatures as inputs

_ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[78=>]"
)
# Control characters left once the sequences are gone, e.g. the shift-in (\x0f) of a terminal
# reset that claude-code prints as it exits: not the agent's output.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
SCRIPTED = "scripted"
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


def strip_ansi(text: str) -> str:
    """Terminal control sequences removed."""
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class Tokens:
    """Token figures of one model request (or of a whole run); `input` is the uncached input
    only, cache reads and writes apart (docs/metrics.md)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def fields(self) -> dict[str, int]:
        """The figures under the `usage` event's names."""
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
        }

    def plus(self, other: Tokens) -> Tokens:
        """Both together."""
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def minus(self, other: Tokens) -> Tokens:
        """What is left of these figures without `other`'s (never below 0)."""
        return Tokens(
            max(0, self.input - other.input),
            max(0, self.output - other.output),
            max(0, self.cache_read - other.cache_read),
            max(0, self.cache_write - other.cache_write),
        )

    def at_least(self, other: Tokens) -> Tokens:
        """The larger of each figure: several reports of one request, the latest most complete."""
        return Tokens(
            max(self.input, other.input),
            max(self.output, other.output),
            max(self.cache_read, other.cache_read),
            max(self.cache_write, other.cache_write),
        )


@dataclass(frozen=True)
class Pricing:
    """Who knows what the run's model costs. `source` is the usage events' `cost_source`:
    `scripted` (the free scripted model), `user` (`[models.X]` prices, or a `command` agent
    declared free), `llmtt` (litellm's price table); None: nobody priced the model and every
    cost is unknown (null), whatever the client computed itself."""

    source: str | None
    model: ResolvedModel | None = None  # None with a source: it costs nothing

    def cost(self, tokens: Tokens) -> float | None:
        """What `tokens` cost, or None when unknown; cache reads and writes at their own
        prices (litellm's, or the user's, which default to the input's)."""
        if self.source is None:
            return None
        if self.model is None:
            return 0.0
        return self.model.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)


SCRIPTED_PRICING = Pricing(SCRIPTED)


def pricing_of(
    model: str | None, models: Mapping[str, ModelSpec], *, free: bool = False
) -> Pricing:
    """The pricing of `model`: scripted, declared free, the user's prices, litellm's table,
    else unknown."""
    if model == SCRIPTED:
        return SCRIPTED_PRICING
    if free:
        return Pricing("user")
    if model is None:
        return Pricing(None)
    resolved = resolve_model(model, models)
    if resolved.prices is not None:
        return Pricing("user", resolved)
    if resolved.cost(1, 1) is not None:  # litellm's table has the model
        return Pricing("llmtt", resolved)
    return Pricing(None)


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


class CliAgent(Agent):
    """Base of the adapters for real agent CLIs installed from npm."""

    executable_name: str
    package: str  # what to install, e.g. "@anthropic-ai/claude-code@2.1.197"
    key_env: tuple[str, ...] = ()  # variables that authenticate it with a real provider
    own_turn_limit = False  # the CLI stops itself at ctx.max_turns (llmtt passes its flag)

    def executable(self) -> str | None:
        """The configured binary, else the first found where llmtt installs agents, else PATH
        (the order is in llmtt/agents/install.py)."""
        configured = self.settings.executable
        if configured:
            path = Path(configured).expanduser()
            path = path if path.is_absolute() else self.project_root / path
            inputs.note_file(path)
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        for place in places(self.project_root, self.name):
            local = place.bin / self.executable_name
            inputs.note_file(local)
            if local.is_file() and os.access(local, os.X_OK):
                return str(local)
        return inputs.which(self.executable_name, tool_path())

    def version(self, probe: VersionProbe) -> str:
        """`<binary> --version`, through the cache."""
        exe = self.executable()
        if exe is None:
            return "not installed"
        return probe(f"{shlex.quote(exe)} --version", exe, {})

    def unavailable(self, model: str | None) -> str | None:
        """Missing binary or, for a real model, missing credentials: say what to do."""
        if self.executable() is None:
            where = self.settings.executable
            if where:
                return (
                    f"{self.name}: [agents.{self.name}] executable {where!r} "
                    f"is not an executable file"
                )
            return (
                f"{self.name} is not installed: run `llmtt agents install {self.name}` (the "
                f"pinned {self.package}, for every project of this user), or set "
                f"[agents.{self.name}] executable in llmtt.toml"
            )
        keys = self.key_variables(model)
        if keys and not any(os.environ.get(k) or self.settings.env.get(k) for k in keys):
            spec = self.models.get(model or "")
            where = (
                f" ([models.{toml_key(model or '')}] api_key_env)"
                if spec and spec.api_key_env
                else ""
            )
            return (
                f"{self.name} needs {' or '.join(keys)} for model {model!r}{where}: set it "
                f"(or use model=scripted)"
            )
        return None

    def key_variables(self, model: str | None) -> tuple[str, ...]:
        """The variables that authenticate this agent with `model`: the one its `[models.X]`
        names, none for a gateway given without one (it may need no key), else the CLI's own
        for the model's provider."""
        if model is None or model == SCRIPTED:
            return ()
        spec = self.models.get(model)
        if spec is not None and spec.api_key_env:
            return (spec.api_key_env,)
        if spec is not None and spec.api_base:
            return ()
        return self.provider_keys(spec.id if spec is not None and spec.id else model)

    def provider_keys(self, model_id: str) -> tuple[str, ...]:
        """The CLI's own key variables for a model it reaches by itself."""
        return self.key_env

    def passed_env(self, model: str | None) -> dict[str, str]:
        """Variables from the caller's environment this agent may see: the configured ones,
        and the key variables of the model it talks to (never another provider's)."""
        names = [*self.settings.pass_env, *self.key_variables(model)]
        return {n: os.environ[n] for n in names if n in os.environ}

    def endpoint(self, ctx: RunContext) -> Endpoint:
        """Where this run's model is reached, and with which key."""
        assert ctx.model is not None
        return endpoint_of(ctx.model, ctx.models, ctx.env, ctx.model_url)

    @abstractmethod
    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """argv and the extra environment for one run."""

    @abstractmethod
    def parser(self, ctx: RunContext) -> StreamParser:
        """A fresh parser for this agent's stream in this run."""

    def pricing(self, ctx: RunContext) -> Pricing:
        """Who knows the price of the run's model (the usage events' cost and cost_source)."""
        return pricing_of(ctx.model, ctx.models, free=self.free)

    def run(self, ctx: RunContext) -> AgentExit:
        """Launch the CLI under the PTY, normalise its stream, close with `complete`."""
        exe = self.executable()
        assert exe is not None  # checked by unavailable() before the run
        argv, extra = self.command(ctx, exe)
        argv += self.settings.args
        env = {**ctx.env, **self.passed_env(ctx.model), **extra}
        ctx.events.emit("spawn", command=argv[0], args=argv[1:])
        parser = self.parser(ctx)
        lines = LineBuffer(parser)
        limits = Limits(ctx, parser, own_turn_limit=self.own_turn_limit)
        result = run_in_pty(
            argv,
            cwd=ctx.workspace,
            env=env,
            timeout_secs=ctx.timeout_secs,
            transcript=ctx.transcript,
            on_output=lines.feed,
            stop=limits.reached,
        )
        with ctx.events.held():  # what only the end shows, written at once
            lines.flush()
            parser.poll()
            parser.finish()
        reason = limits.reason if result.stopped else None
        if reason is not None:
            ctx.events.emit("output", text=reason)
        elif result.timed_out:
            reason = f"timed out after {ctx.timeout_secs:g}s"
        elif parser.turn_limit_hit:
            reason = f"turn limit reached ({ctx.max_turns} turns)"
        else:
            reason = parser.reason
        natural = False if result.timed_out or result.stopped else parser.natural_stop
        ctx.events.emit(
            "complete",
            exit_code=result.exit_code,
            duration_secs=round(result.duration_secs, 3),
            timed_out=result.timed_out,
            natural_stop=natural,
            turns=parser.turns if parser.per_request else None,
            **({"reason": reason} if reason else {}),
        )
        if result.timed_out:
            ctx.transcript.write(f"\n[llmtt: run timed out after {ctx.timeout_secs:g}s]\n".encode())
        return AgentExit(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_secs=result.duration_secs,
            natural_stop=natural,
            error=limits.budget if result.stopped and reason == limits.budget else None,
            reason=reason,
        )


class Limits:
    """What stops a CLI run early, counted from its event stream: the turn limit (where the CLI
    has no flag of its own), the scenario's cost limit and the session budget.

    Costs count only where a price is known. When the cost is unknown nothing can be compared
    with a limit in dollars: the run is then not stopped for its cost, and the event log says
    so once.
    """

    def __init__(self, ctx: RunContext, parser: StreamParser, *, own_turn_limit: bool) -> None:
        self.ctx = ctx
        self.parser = parser
        self.own_turn_limit = own_turn_limit
        self.reason: str | None = None  # why the run was stopped
        self.budget: str | None = None  # the session budget's reason: the run stays pending
        self._checked: float | None = None  # the cost the session budget last saw
        self._told = False

    def reached(self) -> bool:
        """Whether the run must stop now (asked after each read of its output)."""
        self.parser.poll()
        self.reason = self._turns() or self._cost()
        return self.reason is not None

    def _turns(self) -> str | None:
        # The agent made max_turns requests and would make another one once the last one's
        # tool calls have their results; a request beyond the limit stops even an agent that
        # keeps its own count.
        parser, limit = self.parser, self.ctx.max_turns
        over = parser.requests > limit
        if over or (not self.own_turn_limit and parser.requests == limit and parser.settled):
            return f"turn limit reached ({limit} turns)"
        return None

    def _cost(self) -> str | None:
        spent, ctx = self.parser.spent, self.ctx
        if spent is None:
            if not self._told and (ctx.max_usd is not None or ctx.session_budget is not None):
                self._told = True
                model = f"model {ctx.model!r}" if ctx.model else "the agent's model"
                ctx.events.emit(
                    "output",
                    text=f"llmtt: no price is known for {model}, so neither the cost limit "
                    "nor the session budget can stop this run (give its prices in [models] "
                    "input_usd_per_mtok and output_usd_per_mtok)",
                )
            return None
        if ctx.max_usd is not None and spent > ctx.max_usd:
            return f"cost limit reached: spent ${spent:.4f} of ${ctx.max_usd:g}"
        if spent != self._checked:
            self._checked = spent
            self.budget = ctx.over_budget(spent)
        return self.budget
