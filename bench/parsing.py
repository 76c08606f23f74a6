"""Stream parsing throughput: each CLI's recorded stream (tests/data), repeated to ~40 MB and
fed in the PTY runner's read size through `LineBuffer` into the agent's parser, writing redacted
events to a file, as a run does; then a stream whose one tool result is a 16 MB line.

Run: `.venv/bin/python bench/parsing.py`. Prints MB/s per agent and case (best of 3).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmtt.agents.claude_code import ClaudeStream  # noqa: E402
from llmtt.agents.codex import CodexStream  # noqa: E402
from llmtt.agents.opencode import OpencodeStream  # noqa: E402
from llmtt.agents.pricing import SCRIPTED_PRICING  # noqa: E402
from llmtt.agents.stream import LineBuffer, StreamParser  # noqa: E402
from llmtt.events import EventWriter  # noqa: E402
from llmtt.process.pty import READ_SIZE  # noqa: E402
from llmtt.redaction import Redactor  # noqa: E402

DATA = ROOT / "tests" / "data"
TARGET_BYTES = 40_000_000
BIG_LINE = 16 * 1024 * 1024
# In every recording, the `git --help` call's result carries this text inside a JSON string.
MARKER = b"usage: git"


def parser_for(kind: str, events: EventWriter, home: Path) -> StreamParser:
    if kind == "claude-code":
        return ClaudeStream(events, SCRIPTED_PRICING)
    if kind == "opencode":
        return OpencodeStream(events, SCRIPTED_PRICING)
    return CodexStream(events, SCRIPTED_PRICING, home=home)


def feed(kind: str, raw: bytes, folder: Path) -> float:
    """Seconds to parse `raw` as a run would (a secret known to the redactor, as with a key)."""
    redact = Redactor({"ANTHROPIC_API_KEY": "sk-ant-bench-0123456789abcdef"})
    with open(folder / "events.jsonl", "w", encoding="utf-8") as handle:
        parser = parser_for(kind, EventWriter(handle, redact), folder)
        lines = LineBuffer(parser)
        started = time.perf_counter()
        for start in range(0, len(raw), READ_SIZE):
            lines.feed(raw[start : start + READ_SIZE])
        with parser.events.held():
            lines.flush()
            parser.poll()
            parser.finish()
        return time.perf_counter() - started


def streams(kind: str) -> dict[str, bytes]:
    """The recorded stream repeated to TARGET_BYTES, and one with a 16 MB tool result."""
    raw = (DATA / f"{kind}.transcript.raw.txt").read_bytes()
    if not raw.endswith(b"\n"):
        raw += b"\n"
    # Each copy's text differs (as a real session's outputs do), so no cache of the strings
    # already seen makes the copies cheaper than the first.
    repeated = b"".join(
        raw.replace(b"the ", b"th%d " % i).replace(b"git", b"g%dt" % i)
        for i in range(max(1, TARGET_BYTES // len(raw)))
    )
    at = raw.index(MARKER)
    big = raw[:at] + MARKER + b"x" * BIG_LINE + raw[at + len(MARKER) :]
    return {"repeated": repeated, "16 MB line": big}


def main() -> None:
    print(f"{'agent':<12} {'case':<11} {'MB':>6} {'MB/s':>7}")
    for kind in ("claude-code", "opencode", "codex"):
        for case, raw in streams(kind).items():
            best = float("inf")
            for _ in range(3):
                with tempfile.TemporaryDirectory() as tmp:
                    best = min(best, feed(kind, raw, Path(tmp)))
            size = len(raw) / 1e6
            print(f"{kind:<12} {case:<11} {size:>6.1f} {size / best:>7.1f}", flush=True)
    print(f"(read size {READ_SIZE} bytes; best of 3; pid {os.getpid()})")


if __name__ == "__main__":
    main()
