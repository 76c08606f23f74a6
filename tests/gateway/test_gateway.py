"""The model gateway in-process: the scripted model as its upstream (all three wire formats,
plain and streamed), and small fake providers that cut, refuse or vanish. What each request's
record says is what the upstream's wire said."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from llmtt.gateway.proxy import PLACEHOLDER_KEY, Gateway, Record, Upstream
from llmtt.scripted.server import ScriptedServer
from llmtt.spec.scripted import ScriptedSession, Turn, TurnUsage
from tests.conftest import serving

KEY = "sk-real-upstream-key-3c9"
PATHS = {"messages": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
TOOL = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
TOOLS = {
    "messages": {"name": "Bash", "description": "run", "input_schema": TOOL},
    "chat": {"type": "function", "function": {"name": "shell", "parameters": TOOL}},
    "responses": {"type": "function", "name": "shell", "parameters": TOOL},
}
FIGURES = TurnUsage(input=500, output=40, cache_read=2000, cache_write=300)


class Records:
    """The gateway's records, waited for."""

    def __init__(self) -> None:
        self.items: list[Record] = []
        self.arrived = threading.Condition()

    def __call__(self, record: Record) -> None:
        with self.arrived:
            self.items.append(record)
            self.arrived.notify_all()

    def wait(self, count: int = 1) -> list[Record]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.items) >= count, timeout=10)
            return list(self.items)


def body(wire: str, stream: bool) -> dict[str, Any]:
    """A first request of `wire`, offering a shell tool."""
    out: dict[str, Any] = {"model": "m", "stream": stream, "tools": [TOOLS[wire]]}
    if wire == "responses":
        out["input"] = [{"type": "message", "role": "user", "content": "go"}]
    else:
        out["messages"] = [{"role": "user", "content": "go"}]
    return out


def post(url: str, payload: dict[str, Any], key: str = PLACEHOLDER_KEY) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={
            "Content-Type": "application/json",
            "x-api-key": key,
            "Authorization": f"Bearer {key}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    session = ScriptedSession(turns=[Turn(run=["ls"], usage=FIGURES)])
    with ScriptedServer(session, api_key=KEY) as server:
        yield server


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("wire", ["messages", "chat", "responses"])
def test_usage_is_read_off_the_wire_and_the_agent_never_holds_the_key(
    scripted: ScriptedServer, wire: str, stream: bool
) -> None:
    records = Records()
    with Gateway(records) as gateway:
        base = gateway.add(Upstream(f"{scripted.url}/v1", KEY, "x-api-key"), "s/claude/r1")
        assert KEY not in base
        status, answer = post(base.removesuffix("/v1") + PATHS[wire], body(wire, stream))
        assert status == 200, answer
        assert b"ls" in answer  # the turn's call came through
        record = records.wait()[0]
    cache_write = 300 if wire == "messages" else 0  # the OpenAI wires have no field for it
    assert record["run"] == "s/claude/r1" and record["status"] == 200
    assert record["stream"] is stream and record["complete"] is True
    assert (record["input_tokens"], record["output_tokens"]) == (500, 40)
    assert (record["cache_read_tokens"], record["cache_write_tokens"]) == (2000, cache_write)
    assert "fault" not in record
    # The placeholder the agent holds opens nothing by itself.
    status, _ = post(f"{scripted.url}{PATHS[wire]}", body(wire, stream))
    assert status == 401


def test_an_agent_that_hangs_up_mid_answer_is_counted_whole() -> None:
    from llmtt.spec.scripted import Hang

    session = ScriptedSession(
        # An answer longer than the sockets hold: the gateway sees the agent is gone.
        turns=[
            Turn(say="x" * 3_000_000, run=["ls"], usage=FIGURES, hang=Hang(secs=0.5, at="stream"))
        ]
    )
    records = Records()
    with ScriptedServer(session) as server, Gateway(records) as gateway:
        base = gateway.add(Upstream(f"{server.url}/v1"))
        request = urllib.request.Request(
            base + "/messages",
            data=json.dumps(body("messages", True)).encode(),
            headers={"Content-Type": "application/json"},
        )
        answer = urllib.request.urlopen(request, timeout=10)
        answer.read1(10)  # the first event, then the agent is gone
        answer.close()
        record = records.wait()[0]
    assert record["client_gone"] is True and record["complete"] is True
    assert (record["input_tokens"], record["output_tokens"]) == (500, 40)


class _Cut(BaseHTTPRequestHandler):
    """A provider whose stream ends after its first events, before any output count."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        start = {
            "type": "message_start",
            "message": {"model": "claude-x", "usage": {"input_tokens": 700, "output_tokens": 1}},
        }
        self.wfile.write(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "he"},
        }
        self.wfile.write(f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class _Limited(BaseHTTPRequestHandler):
    after = "7"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["content-length"]))
        data = b'{"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}'
        self.send_response(429)
        self.send_header("Retry-After", self.after)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_stream_the_provider_cuts_counts_what_the_wire_showed_as_a_lower_bound() -> None:
    records = Records()
    with serving(_Cut) as url, Gateway(records) as gateway:
        base = gateway.add(Upstream(url))
        status, _ = post(base + "/messages", body("messages", True))
        record = records.wait()[0]
    assert status == 200
    assert record["fault"] == "cut" and record["complete"] is False
    assert record["input_tokens"] == 700 and record["model"] == "claude-x"


def test_a_429_and_an_unreachable_endpoint_are_faults_with_their_cause() -> None:
    records = Records()
    with serving(_Limited) as url, Gateway(records) as gateway:
        limited = gateway.add(Upstream(url))
        status, answer = post(limited + "/messages", body("messages", False))
        assert status == 429 and b"slow down" in answer
        gone = gateway.add(Upstream("http://127.0.0.1:9/v1"))
        status, answer = post(gone + "/chat/completions", body("chat", False))
        assert status == 502 and b"cannot reach the model endpoint" in answer
        # Each is recorded once its answer is sent: under load the second may be first.
        faults = {record["fault"]: record for record in records.wait(2)}
    first, second = faults["rate_limited"], faults["connection"]
    assert first["retry_after"] == 7.0
    assert first["message"] == "slow down"  # the provider's own words, for the reports
    assert second["fault"] == "connection" and second["status"] == 502


def test_a_closed_route_opens_nothing() -> None:
    with Gateway() as gateway:
        base = gateway.add(Upstream("http://127.0.0.1:9/v1"))
        gateway.remove(base)
        status, _ = post(base + "/messages", body("messages", False))
    assert status == 404


@pytest.mark.parametrize("wire", ["messages", "chat", "responses"])
def test_a_request_past_a_limit_never_goes_upstream(wire: str, tmp_path: Path) -> None:
    records = Records()
    limit: list[str | None] = [None]
    log = tmp_path / "scripted.log"
    session = ScriptedSession(turns=[Turn(run=["ls"]), Turn(run=["ls"])])
    with ScriptedServer(session, log, api_key=KEY) as scripted, Gateway(records) as gateway:
        upstream = Upstream(f"{scripted.url}/v1", KEY, "x-api-key", admit=lambda: limit[0])
        base = gateway.add(upstream).removesuffix("/v1")
        asked = {**body(wire, False), "max_tokens": 900}
        assert post(base + PATHS[wire], asked)[0] == 200
        limit[0] = "cost limit reached: spent $0.2000 of $0.2"
        status, answer = post(base + PATHS[wire], asked)
        # Each is recorded once its answer is sent: under load the refusal may come first.
        second, first = sorted(records.wait(2), key=lambda record: "refused" not in record)
    # Refused as the wire's provider refuses a request no retry mends: the agent stops.
    assert status == 400
    error = json.loads(answer)["error"]
    assert error["type"] == "invalid_request_error" and "cost limit reached" in error["message"]
    assert second["refused"] == limit[0] and "input_tokens" not in second
    # The refused request never reached the provider.
    assert len(log.read_text().splitlines()) == 1, log.read_text()
    # What the record says of each request: tools offered (none: a side request), its limit.
    assert first["tools"] == 1 and first["max_tokens"] == 900


class _Stalled(BaseHTTPRequestHandler):
    """A provider that starts its answer (the input billed) and then never finishes it."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        start = {"type": "message_start", "message": {"usage": {"input_tokens": 900}}}
        self.wfile.write(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
        self.wfile.flush()
        threading.Event().wait(1.5)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_request_under_way_at_close_is_recorded_as_unfinished() -> None:
    records = Records()
    with serving(_Stalled) as url:
        with Gateway(records, drain_secs=0.3) as gateway:
            base = gateway.add(Upstream(url), "s/a/r1")
            request = urllib.request.Request(
                base + "/messages",
                data=json.dumps(body("messages", True)).encode(),
                headers={"Content-Type": "application/json"},
            )
            answer = urllib.request.urlopen(request, timeout=10)
            answer.read1(10)
        (record,) = records.wait()
        answer.close()
    # What the wire showed is kept: the input the provider reported before it stalled.
    assert record["unfinished"] is True and record["complete"] is False
    assert record["input_tokens"] == 900 and record["run"] == "s/a/r1"


class _Briefly(BaseHTTPRequestHandler):
    """429 with a Retry-After of 0.6 s to every request; keeps when each arrived."""

    arrivals: list[float] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.arrivals.append(time.monotonic())
        self.rfile.read(int(self.headers["content-length"]))
        data = b'{"error": {"type": "rate_limit_error", "message": "slow down"}}'
        self.send_response(429)
        self.send_header("Retry-After", "0.6")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_retry_after_keeps_the_next_request_back_whatever_the_agent_does() -> None:
    records = Records()
    handler = type("Handler", (_Briefly,), {"arrivals": []})
    with serving(handler) as url, Gateway(records) as gateway:
        base = gateway.add(Upstream(url))
        post(base + "/messages", body("messages", False))
        post(base + "/messages", body("messages", False))  # an agent that retries at once
        first, second = records.wait(2)
    assert first["retry_after"] == 0.6 and "waited_secs" not in first
    assert second["waited_secs"] > 0
    # The provider saw the second request no sooner than it asked (the first arrived before
    # its answer said when to come back).
    assert handler.arrivals[1] - handler.arrivals[0] >= 0.6


class _Slow(_Briefly):
    """429 with a Retry-After of 30 s."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.arrivals.append(time.monotonic())
        self.rfile.read(int(self.headers["content-length"]))
        data = b'{"error": {"type": "rate_limit_error", "message": "come back later"}}'
        self.send_response(429)
        self.send_header("Retry-After", "30")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_request_held_back_when_the_run_ends_is_never_sent_nor_recorded() -> None:
    records = Records()
    handler = type("Handler", (_Slow,), {"arrivals": []})
    answers: list[tuple[int, bytes]] = []
    admitted: list[int] = []

    def admit() -> str | None:
        admitted.append(1)
        return None

    with serving(handler) as url:
        with Gateway(records, drain_secs=5) as gateway:
            base = gateway.add(Upstream(url, admit=admit))
            post(base + "/messages", body("messages", False))
            waiting = threading.Thread(
                target=lambda: answers.append(post(base + "/messages", body("messages", False)))
            )
            waiting.start()
            time.sleep(0.3)  # held back for the Retry-After's 30 s
            started = time.monotonic()
        waiting.join(5)
        closed_in = time.monotonic() - started
    assert closed_in < 2  # the run's end does not wait for the hold
    assert len(handler.arrivals) == 1  # the held request never reached the provider
    assert answers and answers[0][0] == 400 and b"the run has ended" in answers[0][1]
    assert [r["fault"] for r in records.items] == ["rate_limited"]  # nothing else recorded
    assert len(admitted) == 1  # no limit was asked after the end (no stale ledger entry)


class _NoUsage(BaseHTTPRequestHandler):
    """A Chat Completions server that streams an answer, ends it properly, and never reports
    usage (it ignores include_usage)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"model": "local", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


def test_a_stream_that_ends_without_usage_is_a_lower_bound_not_a_cut() -> None:
    records = Records()
    with serving(_NoUsage) as url, Gateway(records) as gateway:
        base = gateway.add(Upstream(url))
        status, answer = post(base + "/chat/completions", body("chat", True))
        (record,) = records.wait()
    assert status == 200 and b"[DONE]" in answer
    assert record["complete"] is False and "fault" not in record
