"""A 200 MB fixture is never read whole into memory: hashing, copying the workspace (also for each
command gate), the guidance given to the agent and the file gates all stay far below its size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import DOIT, GIT_TOML, Project

from llmtt.evaluation.gates import CHUNK, GateContext, run_gates
from llmtt.spec.gates import FileContains

SIZE = 200 << 20
LIMIT_KB = 120 << 10  # doit with llmtt peaks near 50 MB; reading the file whole adds >= 200 MB

# Runs doit as its only child and prints the child's peak resident set size (KB on Linux).
MEASURE = """\
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_200_mb_fixture_keeps_doit_far_below_its_size(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    big = project.root / "scenarios/fixtures/big/README.md"  # also what an agent is given to read
    big.parent.mkdir(parents=True)
    with open(big, "wb") as handle:
        handle.truncate(SIZE)  # sparse: no time or disk to make, 200 MB to whoever reads it
        handle.seek(SIZE - 100)
        handle.write(b"needle-at-the-end\n")
    project.write(
        "scenarios/big.yaml",
        """\
        task: {prompt: Read the README.}
        fixture: fixtures/big
        solution: [wc -c README.md]
        evaluation:
          gates:
            - {type: file_exists, path: README.md}
            - {type: file_contains, path: README.md, substring: needle-at-the-end}
            - {type: file_matches, path: README.md, pattern: needle}
            - {type: command_succeeds, command: test -s README.md}
        """,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", MEASURE, DOIT, "run"],
            cwd=project.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
        code, peak_kb = (int(word) for word in proc.stdout.split())
        assert code == 0, proc.stderr
        gates = project.json("big/oracle/r1/gates.json")["gates"]
        assert [g["passed"] for g in gates] == [True, True, False, True]
        assert gates[2]["message"] == (
            "README.md has 209,715,200 bytes; file_matches reads files up to 16,777,216 bytes "
            "(a command_succeeds gate with `grep -E` has no such limit)"
        )
        workspace_copy = project.results() / "big/oracle/r1/workspace/README.md"
        assert workspace_copy.stat().st_size == SIZE
        assert peak_kb < LIMIT_KB, f"doit peaked at {peak_kb // 1024} MB with a 200 MB fixture"
        assert elapsed < 60
        print(json.dumps({"peak_rss_mb": round(peak_kb / 1024, 1), "secs": round(elapsed, 2)}))
    finally:
        shutil.rmtree(project.results(), ignore_errors=True)  # 200 MB of real blocks


def test_file_contains_reads_in_chunks_and_misses_nothing_at_their_seams(tmp_path: Path) -> None:
    work = tmp_path / "workspace"
    work.mkdir()
    needle = "needle-across-the-seam"
    for offset in range(-len(needle), 2):
        text = "x" * (CHUNK + offset) + needle + "\n"
        (work / f"at{offset}.txt").write_text(text)
    (work / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")  # read as text: newlines are \n
    (work / "latin1.txt").write_bytes(b"caf\xe9 au lait")  # not UTF-8: replaced, still searched
    gates = [FileContains(path=p.name, substring=needle) for p in sorted(work.glob("at*.txt"))] + [
        FileContains(path="crlf.txt", substring="one\ntwo"),
        FileContains(path="latin1.txt", substring="au lait"),
        FileContains(path="crlf.txt", substring="absent"),
    ]
    env = {"PATH": os.environ["PATH"]}
    results = run_gates(gates, GateContext(work, env, 10, []))
    assert [r["passed"] for r in results] == [True] * (len(needle) + 2) + [True, True, False]
