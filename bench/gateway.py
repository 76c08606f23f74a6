"""What the model gateway adds to a request: the scripted model answered directly and through
the gateway, interleaved in one process, plain and streamed, in each wire format; and through a
route held to a run's limits, which folds the run's earlier requests (100 here) before each one
goes upstream, as a run's `_Wire.admit` does.

    .venv/bin/python bench/gateway.py [--requests 200] [--json FILE]

Target (issue 29): under 5 ms added a request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmtt.gateway.proxy import Gateway, Upstream
from llmtt.gateway.usage import fold
from llmtt.scripted.server import ScriptedServer
from llmtt.spec.scripted import ScriptedSession, Turn

PATHS = {"messages": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}


def _body(wire: str, stream: bool) -> bytes:
    body: dict[str, Any] = {"model": "m", "stream": stream}
    if wire == "responses":
        body["input"] = "say hello"
    else:
        body["messages"] = [{"role": "user", "content": "say hello"}]
    return json.dumps(body).encode()


# One earlier request of a run, as the gateway records it.
HISTORY = {
    "path": "/v1/messages",
    "wire": "anthropic-messages",
    "status": 200,
    "tools": 3,
    "complete": True,
    "input_tokens": 1200,
    "output_tokens": 40,
    "body_sha": "0",
}


def _price(i: int, o: int, r: int, w: int) -> float:
    return (i * 3 + o * 15 + r * 0.3 + w * 3.75) / 1e6


def _post(base: str, path: str, body: bytes) -> float:
    parts = urlsplit(base)
    started = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    conn.request("POST", parts.path.rstrip("/") + path, body, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    conn.close()
    assert answer.status == 200, answer.status
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    # Requests offering no tool are side requests: a text answer each time, as often as asked.
    session = ScriptedSession(turns=[Turn(say="hello")])
    figures: dict[str, dict[str, float]] = {}
    earlier = [HISTORY] * 100

    def admit() -> str | None:
        run = fold(earlier, _price)
        return "over" if run.loop.requests > 10_000 else None

    with ScriptedServer(session) as server, Gateway() as gateway:
        routed = gateway.add(Upstream(f"{server.url}/v1")).removesuffix("/v1")
        limited = gateway.add(Upstream(f"{server.url}/v1", admit=admit)).removesuffix("/v1")
        for wire, path in PATHS.items():
            for stream in (False, True):
                body = _body(wire, stream)
                direct, through, held = [], [], []
                for _ in range(args.requests):
                    direct.append(_post(server.url, path, body))
                    through.append(_post(routed, path, body))
                    held.append(_post(limited, path, body))
                name = f"{wire}-{'stream' if stream else 'plain'}"
                f = figures[name] = {
                    "direct_ms": statistics.median(direct) * 1000,
                    "gateway_ms": statistics.median(through) * 1000,
                    "limited_ms": statistics.median(held) * 1000,
                }
                f["added_ms"] = f["gateway_ms"] - f["direct_ms"]
                f["limited_added_ms"] = f["limited_ms"] - f["direct_ms"]
    for name, f in figures.items():
        print(
            f"{name:18} direct {f['direct_ms']:.2f} ms, through the gateway "
            f"{f['gateway_ms']:.2f} ms: +{f['added_ms']:.2f} ms; held to a run's limits "
            f"{f['limited_ms']:.2f} ms: +{f['limited_added_ms']:.2f} ms (median of "
            f"{args.requests})"
        )
    worst = max(max(f["added_ms"], f["limited_added_ms"]) for f in figures.values())
    print(f"most added a request: {worst:.2f} ms (target: under 5 ms)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
