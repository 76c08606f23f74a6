"""The gateway's HTTP server, on 127.0.0.1, in a background thread (one per run for now).

Each upstream (a provider, a local server, the scripted model) is registered under a route of
its own, `/r/<token>`: an agent is given `http://127.0.0.1:PORT/r/<token>` plus the upstream's
path (`/v1`) as its base URL, and a placeholder key. A request is passed on with the agent's
credentials taken out and the upstream's real one put in, so no key the agent can read opens
anything; the answer is passed back as it arrives, and its usage read off the wire
(`meter`). When the agent hangs up mid-answer, the answer is read to its end all the same, so
the request is counted whole; one still under way when the gateway closes is recorded as far
as the wire showed it (`unfinished`).

Each request becomes one record (`on_record`): its route, wire, the tools it offered and its
`max_tokens`, status, usage, whether the provider's own figures arrived (`complete`), and a
`fault` when the provider or the connection failed: `rate_limited` (with `retry_after`),
`server_error`, `timeout`, `connection`, `cut` (the answer ended before its usage did), with
the provider's `message`; `seen`, the route's needles its body held (Upstream.needles).

A Retry-After keeps the route's next requests back until it has passed (at most
MAX_HOLD_SECS), whatever the agent's own retry policy. A route may have limits
(`Upstream.admit`): a request past them is not sent, and is answered as a provider refuses a
request (400), its record `refused` with the reason.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from llmtt.gateway.meter import StreamMeter, WireUsage, read_body, wire_of
from llmtt.util.http import retry_after_secs

CONNECT_SECS = 30.0
# At close, how long requests under way (an answer read to its end after the agent was
# stopped) may still take to be counted.
DRAIN_SECS = 5.0
READ_SECS = 600.0
MAX_HOLD_SECS = 60.0  # the longest a Retry-After keeps a route's requests back
CHUNK = 65536
# Never passed on: the agent's credentials, and what belongs to one connection only.
DROPPED = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "proxy-authorization",
        "host",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "accept-encoding",
        "te",
        "upgrade",
    }
)
PLACEHOLDER_KEY = "llmtt-gateway"  # what an agent is given instead of a key


@dataclass(frozen=True)
class Upstream:
    """Where a route's requests go: a base URL, and the credential llmtt adds (none: the
    upstream needs none) in the header it wants (`x-api-key`, else `Authorization: Bearer`;
    `auto`: `x-api-key` for requests on the Anthropic wire)."""

    base_url: str
    key: str | None = None
    header: str = "authorization"
    # Asked before each request goes upstream: why it must not (a limit reached), or None.
    admit: Callable[[], str | None] | None = field(default=None, compare=False)
    # Label -> byte strings: a request whose body holds one of a label's strings lists the
    # label in its record's `seen` (what a run's guidance and skills put into the model's
    # context, whichever agent sent it).
    needles: Mapping[str, tuple[bytes, ...]] = field(default_factory=dict, compare=False)

    @property
    def path(self) -> str:
        """The base URL's path (`/v1`), which the agent's base URL ends with too."""
        return urlsplit(self.base_url).path.rstrip("/")


Record = dict[str, Any]


@dataclass(eq=False)
class _Request:
    """One request under way: its record so far, and its answer's meter once it streams."""

    record: Record
    meter: StreamMeter | None = None
    given_up: bool = False  # recorded at close as unfinished, or nothing to record
    sent: bool = False  # passed on upstream (a refused or held-back request never is)


class Gateway:
    """The server; use as a context manager. `add` registers an upstream and returns the base
    URL an agent is given for it; every request's record goes to `on_record`."""

    def __init__(
        self, on_record: Callable[[Record], None] | None = None, drain_secs: float = DRAIN_SECS
    ) -> None:
        self.on_record = on_record
        self.drain_secs = drain_secs
        self._routes: dict[str, tuple[Upstream, str]] = {}
        self._lock = threading.Lock()
        self._under_way: set[_Request] = set()
        self._holds: dict[str, float] = {}  # route -> time.monotonic() it may go on
        self.closing = threading.Event()  # set when the run is over: nothing more is sent
        self._idle = threading.Condition(self._lock)
        gateway = self

        class Handler(_Handler):
            owner = gateway

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Gateway:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # From now on nothing more goes upstream: a request waiting out a Retry-After, or one
        # that comes in now, is answered here and never sent.
        self.closing.set()
        with self._idle:
            self._idle.wait_for(lambda: not self._under_way, timeout=self.drain_secs)
            left = list(self._under_way)
            for request in left:
                request.given_up = True
        # Requests sent and still under way (a provider that outlasted the drain): recorded as
        # far as the wire showed them, so a request the provider may bill is never left out.
        for request in left:
            if request.sent:
                shown = request.meter.usage.as_dict() if request.meter is not None else {}
                self.record({**request.record, **shown, "complete": False, "unfinished": True})
        self._server.shutdown()
        self._server.server_close()

    def begin(self, request: _Request) -> None:
        """A request has come in."""
        with self._idle:
            self._under_way.add(request)

    def end(self, request: _Request) -> None:
        """A request is done: its record goes on, unless it was given up at close."""
        with self._idle:
            self._under_way.discard(request)
            self._idle.notify_all()
            given_up = request.given_up
        if not given_up:
            self.record(request.record)

    def add(self, upstream: Upstream, label: str = "") -> str:
        """Route a new token to `upstream`; `label` names it in the records (a run's id)."""
        token = secrets.token_urlsafe(12)
        with self._lock:
            self._routes[token] = (upstream, label)
        return f"{self.url}/r/{token}{upstream.path}"

    def remove(self, base_url: str) -> None:
        """Close the route a base URL from `add` leads to: later requests get 404."""
        token = urlsplit(base_url).path.split("/")[2]
        with self._lock:
            self._routes.pop(token, None)

    def hold(self, token: str, secs: float) -> None:
        """Keep a route's next requests back `secs` (its provider's Retry-After)."""
        with self._lock:
            until = time.monotonic() + min(secs, MAX_HOLD_SECS)
            self._holds[token] = max(until, self._holds.get(token, 0.0))

    def held(self, token: str) -> float:
        """How long a request on this route must still wait, in seconds."""
        with self._lock:
            return max(0.0, self._holds.get(token, 0.0) - time.monotonic())

    def route(self, token: str) -> tuple[Upstream, str] | None:
        """The upstream and label of a token, if it is open."""
        with self._lock:
            return self._routes.get(token)

    def record(self, record: Record) -> None:
        """Hand one request's record on."""
        if self.on_record is not None:
            self.on_record(record)


class _Handler(BaseHTTPRequestHandler):
    owner: Gateway
    token: str  # the route of the request at hand
    under_way: _Request
    protocol_version = "HTTP/1.0"  # one request a connection; a stream ends with it

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the records say what happened."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._forward()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._forward()

    def _forward(self) -> None:
        parts = self.path.split("/", 3)
        found = self.owner.route(parts[2]) if len(parts) > 2 and parts[1] == "r" else None
        if found is None:
            self._reply(404, {"error": {"message": "llmtt gateway: no such route"}})
            return
        upstream, label = found
        self.token = parts[2]
        rest = "/" + parts[3] if len(parts) > 3 else "/"
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        wire = wire_of(rest)
        body, asked = _prepared(wire, body)
        started = time.monotonic()
        record: Record = {
            "ts": round(time.time(), 3),
            "run": label,
            "method": self.command,
            "path": rest,
            "wire": wire,
            "body_bytes": len(body),
            **asked,
        }
        seen = sorted(k for k, found in upstream.needles.items() if any(n in body for n in found))
        if seen:
            record["seen"] = seen
        request = _Request(record)
        self.under_way = request
        self.owner.begin(request)
        # Every POST is metered and held to the run's limits, whatever its path (a model
        # request, or an embeddings or batch call the key would open all the same).
        metered = self.command == "POST"
        try:
            # Every agent honours a Retry-After: a request sent sooner waits for it here.
            wait = self.owner.held(self.token)
            if wait > 0:
                record["waited_secs"] = round(wait, 3)
                self.owner.closing.wait(wait)
            if self.owner.closing.is_set():
                # The run is over: nothing is sent, and nothing is recorded.
                request.given_up = True
                self._reply(400, _refusal(wire, "llmtt: the run has ended"))
                return
            refusal = upstream.admit() if upstream.admit is not None and metered else None
            if refusal is not None:
                # A limit reached: not sent, answered as a provider refuses a request that no
                # retry can mend (400), so the agent stops rather than tries again.
                record.update({"status": 400, "refused": refusal})
                self._reply(400, _refusal(wire, f"llmtt: {refusal}"))
            else:
                request.sent = True
                self._pass(upstream, rest, body, wire, record)
        finally:
            record["duration_secs"] = round(time.monotonic() - started, 3)
            if not metered and not record.get("fault"):
                request.given_up = True  # a GET (a model list): nothing to count
            self.owner.end(request)

    def _pass(
        self, upstream: Upstream, rest: str, body: bytes, wire: str | None, record: Record
    ) -> None:
        target = urlsplit(upstream.base_url)
        # The agent's base URL ends with the upstream's path (`/v1`); one that left it out
        # (claude-code adds `/v1/messages` itself) gets it.
        inside = rest == upstream.path or rest.startswith(upstream.path + "/")
        path = rest if inside or not upstream.path else upstream.path + rest
        kind = (
            http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
        )
        conn = kind(target.hostname or "", target.port, timeout=CONNECT_SECS)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED}
        headers["Accept-Encoding"] = "identity"  # the usage is read from the bytes
        header = upstream.header
        if header == "auto":  # as the request's wire takes it: Anthropic's own header
            header = "x-api-key" if wire == "anthropic-messages" else "authorization"
        if upstream.key:
            if header == "x-api-key":
                headers["x-api-key"] = upstream.key
            else:
                headers["Authorization"] = f"Bearer {upstream.key}"
        try:
            conn.request(self.command, path or "/", body=body or None, headers=headers)
            conn.sock.settimeout(READ_SECS)
            response = conn.getresponse()
        except TimeoutError:
            self._fail(record, "timeout", 504, "the model endpoint did not answer in time")
            return
        except (OSError, http.client.HTTPException) as exc:
            self._fail(record, "connection", 502, f"cannot reach the model endpoint: {exc}")
            return
        try:
            self._answer(response, wire, record)
        finally:
            conn.close()

    def _answer(self, response: http.client.HTTPResponse, wire: str | None, record: Record) -> None:
        status = response.status
        record["status"] = status
        if status in (401, 403):
            record["fault"] = "refused_key"  # the key llmtt added: the user's, not the agent's
        elif status == 402:
            record["fault"] = "billing"
        elif status == 429:
            record["fault"] = "rate_limited"
            after = record["retry_after"] = retry_after_secs(response.getheader("retry-after"))
            if after:
                self.owner.hold(self.token, after)
        elif status >= 500:
            record["fault"] = "server_error"
        streamed = "text/event-stream" in (response.getheader("content-type") or "")
        self.send_response(status)
        for name, value in response.getheaders():
            if name.lower() not in DROPPED and name.lower() != "content-encoding":
                self.send_header(name, value)
        if not streamed:
            data = _read_all(response, record)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._send(data)
            if status >= 400:
                record["message"] = _error_message(data)
            if wire is not None and status < 400:
                try:
                    usage = read_body(wire, json.loads(data))
                except ValueError:
                    usage = WireUsage(wire)
                self._usage(record, usage)
            return
        self.end_headers()
        meter = self.under_way.meter = StreamMeter(wire or "openai-chat")
        gone = False
        while True:
            try:
                chunk = response.read1(CHUNK)
            except (OSError, http.client.HTTPException):
                record.setdefault("fault", "cut")
                break
            if not chunk:
                break
            meter.feed(chunk)
            if not gone and not self._send(chunk):
                # The agent hung up: the answer is read to its end all the same, so the
                # request is counted whole.
                gone = record["client_gone"] = True
        usage = meter.close()
        if wire is not None:
            self._usage(record, usage)
            # A stream that ended as its wire ends one, without usage (a server that reports
            # none), lost nothing: a lower bound, not a cut.
            if not usage.complete and status < 400 and not meter.ended:
                record.setdefault("fault", "cut")

    def _usage(self, record: Record, usage: WireUsage) -> None:
        record.update(usage.as_dict())

    def _send(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False

    def _fail(self, record: Record, fault: str, status: int, message: str) -> None:
        record.update({"status": status, "fault": fault, "message": message})
        self._reply(
            status, {"error": {"type": "api_error", "message": f"llmtt gateway: {message}"}}
        )

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass


MAX_TOKENS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _prepared(wire: str | None, body: bytes) -> tuple[bytes, Record]:
    """The request body as passed on, and what the record says of the request: whether it
    asks for a stream, how many tools it offers (none: a side request, such as a title), the
    most output it allows (`max_tokens`, when it names it) and a digest of what it asks. A
    streamed Chat Completions request is made to carry its usage in its last event
    (`include_usage`), the one place that wire reports it."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return body, {"stream": False, "body_sha": hashlib.sha256(body).hexdigest()[:16]}
    streamed = bool(parsed.get("stream"))
    tools = parsed.get("tools")
    # Names what is asked: an agent's retry of a request asks the same again, streamed or not.
    asked_for = {k: v for k, v in parsed.items() if k not in ("stream", "stream_options")}
    digest = hashlib.sha256(json.dumps(asked_for, sort_keys=True).encode()).hexdigest()[:16]
    asked: Record = {
        "stream": streamed,
        "tools": len(tools) if isinstance(tools, list) else 0,
        "body_sha": digest,
    }
    limit = next((parsed[k] for k in MAX_TOKENS if k in parsed), None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        asked["max_tokens"] = limit
    if wire == "openai-chat" and streamed:
        options = parsed.get("stream_options")
        if not isinstance(options, dict) or not options.get("include_usage"):
            parsed["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
            return json.dumps(parsed).encode(), asked
    return body, asked


def _refusal(wire: str | None, message: str) -> dict[str, Any]:
    """A request refused as the wire's own provider words it."""
    if wire == "anthropic-messages":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"type": "invalid_request_error", "code": "llmtt_limit", "message": message}}


def _read_all(response: http.client.HTTPResponse, record: Record) -> bytes:
    try:
        return response.read()
    except http.client.IncompleteRead as exc:
        record["fault"] = "cut"
        return bytes(exc.partial)
    except (OSError, http.client.HTTPException):
        record["fault"] = "cut"
        return b""


def _error_message(data: bytes) -> str:
    """What a provider's error answer says, short: its `error.message`, else its start."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    text = message if isinstance(message, str) else data.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")
