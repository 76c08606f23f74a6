"""The litellm loop's retries wait as long as the provider's Retry-After asks (through litellm's
real HTTP client, against a provider on loopback), never less than their own backoff."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from llmtt.providers import ResolvedModel, complete
from tests.conftest import chat_answer, serving


class _LimitedOnce(BaseHTTPRequestHandler):
    hits: list[int] = []
    after = "2"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.hits.append(1)
        first = len(self.hits) == 1
        data = json.dumps(
            {"error": {"message": "slow down", "type": "rate_limit_error"}}
            if first
            else chat_answer("done")
        ).encode()
        self.send_response(429 if first else 200)
        if first:
            self.send_header("Retry-After", self.after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("after", "waited"), [("2", 2.0), ("0", 0.25)], ids=["asked", "own"])
def test_a_429_is_retried_after_the_providers_retry_after(after: str, waited: float) -> None:
    handler = type("Handler", (_LimitedOnce,), {"hits": [], "after": after})
    sleeps: list[float] = []
    with serving(handler) as url:
        model = ResolvedModel("m", "openai/m", url, "k", None)
        answer = complete(
            model,
            max_retries=2,
            backoff_secs=0.25,
            # a request's own limit, far above what it takes: a request that timed out on a
            # busy machine would be retried with the own backoff, which is not what is tested
            timeout_secs=120,
            sleep=sleeps.append,
            messages=[{"role": "user", "content": "go"}],
        )
    assert answer.choices[0].message.content == "done"
    assert sleeps == [waited]  # the provider's wait when it asks one, else the own backoff
