"""The scripted model's HTTP server on 127.0.0.1: routes a request to its wire format, plays
the session's errors and hangs, answers plainly or streamed, and logs every request.

Each log line (JSON) holds: `ts`, `path`, `model`, `stream`, `tools` (tools offered),
`played` (the turns a marker in the conversation says were played before a compaction, 0
without one; see session.py), `results` (tool results in the conversation, after that marker),
`answered` (the ids of the previous turn's results, in the order the client sent them), `side`
(a side request: no shell tool),
`turn` (0-based position in the session; the final answer is the number of turns),
`attempt` (how often this turn was asked for, counting this request; 0 for side requests),
`status` (the HTTP status returned), `hang_secs`, `calls` (tool calls in the answer),
`commands`, `command` (the first one, or null) and `text`.

With an `api_key`, a POST must carry it (`Authorization: Bearer KEY` or `x-api-key: KEY`); one
that does not is refused with 401 in its wire's error format, logged with that status, no calls
and attempt 0, and counts no attempt of its turn. GET and HEAD stay open.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from llmtt.scripted import chat, messages, responses
from llmtt.scripted import session as play
from llmtt.scripted.session import Reply
from llmtt.scripted.wire import Event, Request, Wire
from llmtt.spec.scripted import Hang, HttpError, ScriptedSession
from llmtt.util.atomic import open_private

WIRES = (
    ("/messages", messages.WIRE),
    ("/chat/completions", chat.WIRE),
    ("/responses", responses.WIRE),
)
Fault = TypeVar("Fault", HttpError, Hang)


class ScriptedServer:
    """The server, on 127.0.0.1 and a free port, in a background thread. It plays `session`,
    or a solution's commands as the default session; with `api_key`, only to requests that
    carry that key."""

    def __init__(
        self,
        session: ScriptedSession | Sequence[str],
        log: Path | None = None,
        port: int = 0,
        *,
        api_key: str | None = None,
    ) -> None:
        if not isinstance(session, ScriptedSession):
            session = ScriptedSession.of_solution(list(session))
        self.session = session
        self.api_key = api_key
        self._log = log
        self._lock = threading.Lock()
        self._attempts: dict[int, int] = {}
        self._stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, without a path."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end every hang and close the socket."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def attempt(self, turn: int) -> int:
        """Count one more request for `turn`; return its number (1 = the first)."""
        with self._lock:
            self._attempts[turn] = self._attempts.get(turn, 0) + 1
            return self._attempts[turn]

    def admits(self, authorization: str | None, x_api_key: str | None) -> bool:
        """Whether a request with these headers may be answered: always without a key, else
        when it carries the key as a bearer token or as `x-api-key`."""
        if self.api_key is None:
            return True
        expected = self.api_key.encode()
        scheme, _, token = (authorization or "").strip().partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" else None
        return any(
            given is not None and hmac.compare_digest(given.encode(), expected)
            for given in (bearer, x_api_key)
        )

    def hang(self, secs: float) -> None:
        """Wait `secs`, or until the server stops."""
        self._stopping.wait(secs)

    def record(self, entry: dict[str, Any]) -> None:
        """Append one request to the log (JSON lines)."""
        if self._log is None:
            return
        with self._lock, open_private(self._log, append=True) as handle:
            handle.write((json.dumps(entry) + "\n").encode())


def _applies(fault: Fault | None, attempt: int) -> Fault | None:
    """`fault` when it holds for this attempt (its first `times` ones, or all)."""
    if fault is None or (fault.times is not None and attempt > fault.times):
        return None
    return fault


class _Handler(BaseHTTPRequestHandler):
    server_ref: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        """Quiet: requests go to the run's log instead of stderr."""

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._json({"ok": True, "server": "llmtt scripted"})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, RecursionError):
            self._json({"error": {"message": "request body is not JSON"}}, status=400)
            return
        path = self.path.split("?")[0].rstrip("/")
        wire = next((w for suffix, w in WIRES if path.endswith(suffix)), None)
        if wire is None or not isinstance(body, dict):
            self._json({"error": {"message": f"no such endpoint: {path}"}}, status=404)
            return
        if not self.server_ref.admits(
            self.headers.get("Authorization"), self.headers.get("x-api-key")
        ):
            self._refuse(wire, path, body)
            return
        try:
            self._play(wire, path, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a hang outlasted its timeout)

    def _play(self, wire: Wire, path: str, body: dict[str, Any]) -> None:
        server = self.server_ref
        request = wire.read(body)
        reply = play.answer(server.session, request.tools, len(request.results), request.played)
        attempt = 0 if reply.side else server.attempt(reply.turn)
        hang = _applies(reply.hang, attempt)
        error = _applies(reply.error, attempt)
        stream = bool(body.get("stream"))
        self._log(path, body, reply, request, attempt, error.status if error else 200, hang)
        if hang is not None and (hang.at == "start" or not stream):
            server.hang(hang.secs)
        if error is not None:
            self._error(wire, error, f"scripted HTTP {error.status}: turn {reply.turn + 1}")
            return
        answer = wire.answer(reply, body)
        cut = hang is not None and hang.cut
        if not stream:
            self._json(answer, cut=cut)
            return
        stall = hang.secs if hang is not None and hang.at == "stream" else 0.0
        self._sse(wire.events(answer, body), wire.done, stall, cut=cut)

    def _refuse(self, wire: Wire, path: str, body: dict[str, Any]) -> None:
        """401 for a request without the server's key: logged, but no attempt of its turn."""
        request = wire.read(body)
        reply = play.answer(
            self.server_ref.session, request.tools, len(request.results), request.played
        )
        refused = replace(reply, text=None, commands=(), arguments=())
        self._log(path, body, refused, request, 0, 401, None)
        self._error(wire, HttpError(status=401), "scripted: wrong or missing API key")

    def _log(
        self,
        path: str,
        body: dict[str, Any],
        reply: Reply,
        request: Request,
        attempt: int,
        status: int,
        hang: Hang | None,
    ) -> None:
        self.server_ref.record(
            {
                "ts": round(time.time(), 3),
                "path": path,
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "tools": len(body.get("tools") or []),
                "played": request.played,
                "results": len(request.results),
                "answered": request.results[max(0, len(request.results) - reply.previous_calls) :],
                "side": reply.side,
                "turn": reply.turn,
                "attempt": attempt,
                "status": status,
                "hang_secs": hang.secs if hang is not None else None,
                "calls": len(reply.commands),
                "commands": list(reply.commands),
                "command": reply.commands[0] if reply.commands else None,
                "text": reply.text,
            }
        )

    def _error(self, wire: Wire, error: HttpError, message: str) -> None:
        if isinstance(error.body, str):
            data, kind = error.body.encode(), "text/plain; charset=utf-8"
        else:
            body = error.body if error.body is not None else wire.error(error.status, message)
            data, kind = json.dumps(body).encode(), "application/json"
        self.send_response(error.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in error.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, value: Any, status: int = 200, *, cut: bool = False) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if cut else data)
        if cut:
            self.close_connection = True

    def _sse(self, events: Iterator[Event], done: bytes, stall: float, *, cut: bool) -> None:
        """Stream `events`, stalling `stall` seconds after the first one (and ending the
        stream there when `cut`)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for index, (name, data) in enumerate(events):
            prefix = f"event: {name}\n" if name else ""
            self.wfile.write(f"{prefix}data: {json.dumps(data)}\n\n".encode())
            if index == 0 and (stall or cut):
                self.wfile.flush()
                self.server_ref.hang(stall)
                if cut:
                    self.close_connection = True
                    return
        self.wfile.write(done)
        self.wfile.flush()
        self.close_connection = True
