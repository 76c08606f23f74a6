"""The gateway's HTTP server: one per invocation on 127.0.0.1, in a background thread.

Each upstream (a provider, a local server, the scripted model) is registered under a route of
its own, `/r/<token>`: an agent is given `http://127.0.0.1:PORT/r/<token>` plus the upstream's
path (`/v1`) as its base URL, and a placeholder key. A request is passed on with the agent's
credentials taken out and the upstream's real one put in, so no key the agent can read opens
anything; the answer is passed back as it arrives, and its usage read off the wire
(`meter`). When the agent hangs up mid-answer, the answer is read to its end all the same, so
the request is counted whole. Each request becomes one record (`on_record`): its route, wire,
status, usage, whether the provider's own figures arrived (`complete`), and a `fault` when
the provider or the connection failed: `rate_limited` (with `retry_after`), `server_error`,
`timeout`, `connection`, `cut` (the answer ended before its usage did).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from llmtt.gateway.meter import StreamMeter, WireUsage, read_body, wire_of

CONNECT_SECS = 30.0
# At close, how long requests under way (an answer read to its end after the agent was
# stopped) may still take to be counted.
DRAIN_SECS = 5.0
READ_SECS = 600.0
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
    upstream needs none) in the header it wants (`x-api-key`, else `Authorization: Bearer`)."""

    base_url: str
    key: str | None = None
    header: str = "authorization"

    @property
    def path(self) -> str:
        """The base URL's path (`/v1`), which the agent's base URL ends with too."""
        return urlsplit(self.base_url).path.rstrip("/")


Record = dict[str, Any]


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
        self._active = 0
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
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0, timeout=self.drain_secs)
        self._server.shutdown()
        self._server.server_close()

    def busy(self, change: int) -> None:
        """Count a request in (+1) or out (-1)."""
        with self._idle:
            self._active += change
            self._idle.notify_all()

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
        rest = "/" + parts[3] if len(parts) > 3 else "/"
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        wire = wire_of(rest)
        body, streamed = _prepared(wire, body)
        started = time.monotonic()
        record: Record = {
            "ts": round(time.time(), 3),
            "run": label,
            "method": self.command,
            "path": rest,
            "wire": wire,
            "stream": streamed,
        }
        self.owner.busy(+1)
        try:
            self._pass(upstream, rest, body, wire, record)
        finally:
            record["duration_secs"] = round(time.monotonic() - started, 3)
            if wire is not None or record.get("fault"):
                self.owner.record(record)
            self.owner.busy(-1)

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
        if upstream.key:
            if upstream.header == "x-api-key":
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
        if status == 429:
            record["fault"] = "rate_limited"
            record["retry_after"] = _retry_after(response.getheader("retry-after"))
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
            if wire is not None and status < 400:
                try:
                    usage = read_body(wire, json.loads(data))
                except ValueError:
                    usage = WireUsage(wire)
                self._usage(record, usage)
            return
        self.end_headers()
        meter = StreamMeter(wire or "openai-chat")
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
            if not usage.complete and status < 400:
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


def _prepared(wire: str | None, body: bytes) -> tuple[bytes, bool]:
    """The request body as passed on, and whether it asks for a stream. A streamed Chat
    Completions request is made to carry its usage in its last event (`include_usage`), the
    one place that wire reports it."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return body, False
    if not isinstance(parsed, dict):
        return body, False
    streamed = bool(parsed.get("stream"))
    if wire == "openai-chat" and streamed:
        options = parsed.get("stream_options")
        if not isinstance(options, dict) or not options.get("include_usage"):
            parsed["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
            return json.dumps(parsed).encode(), True
    return body, streamed


def _read_all(response: http.client.HTTPResponse, record: Record) -> bytes:
    try:
        return response.read()
    except http.client.IncompleteRead as exc:
        record["fault"] = "cut"
        return bytes(exc.partial)
    except (OSError, http.client.HTTPException):
        record["fault"] = "cut"
        return b""


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    when = email.utils.parsedate_to_datetime(value) if value else None
    return max(0.0, when.timestamp() - time.time()) if when else None
