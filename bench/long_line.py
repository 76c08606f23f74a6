"""One very long line in an agent's stream: the harness's peak memory while the line streams
in, in the PTY runner's read size, through `LineBuffer` into claude-code's parser (a tool
result of that size), each size in a fresh process.

    .venv/bin/python bench/long_line.py [--mb 16,31,100,1000]

The peak is this process's maximum resident set size, less what it held before the line.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEAD = b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"'
TAIL = b'"}]}}\n'


def one(mb: int) -> None:
    """Feed a line of `mb` MB; print the peak over the starting RSS."""
    from llmtt.agents.claude_code import ClaudeStream
    from llmtt.agents.pricing import SCRIPTED_PRICING
    from llmtt.agents.stream import LineBuffer
    from llmtt.events import EventWriter
    from llmtt.process.pty import READ_SIZE

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(os.devnull, "w") as out:
        lines = LineBuffer(ClaudeStream(EventWriter(out), SCRIPTED_PRICING))
        lines.feed(HEAD)
        piece = bytearray(b"a" * READ_SIZE)
        for _ in range(mb * 1024 * 1024 // READ_SIZE):
            lines.feed(bytes(piece))  # a new object each time, as each read of the PTY gives
        lines.feed(TAIL)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{mb:>6} MB line: harness peak {peak - before:7.1f} MB over its start", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", default="16,31,100,1000")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one(args.one)
        return
    for mb in (int(m) for m in args.mb.split(",")):
        subprocess.run([sys.executable, __file__, "--one", str(mb)], check=True)


if __name__ == "__main__":
    main()
