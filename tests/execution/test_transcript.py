"""The raw transcript's cap (llmtt/execution/transcript.py): its head and its end kept, a line
between them saying how many bytes were cut; and a run whose agent prints more than the cap."""

from __future__ import annotations

import io
import random
import re

import pytest
from conftest import Project

import llmtt.execution.transcript
from llmtt.execution.agent_layer import execute_run
from llmtt.execution.transcript import Capped
from llmtt.plan.runs import build_plan
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection
from llmtt.util.atomic import read_jsonl


class _Kept(io.BytesIO):
    """A file whose content outlives its close."""

    def close(self) -> None:
        self.kept = self.getvalue()
        super().close()


def _written(limit: int, chunks: list[bytes]) -> bytes:
    file = _Kept()
    with io.BufferedWriter(Capped(file, limit)) as writer:
        for chunk in chunks:
            writer.write(chunk)
            writer.flush()
    return file.kept


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 1_000, 100_000])
def test_up_to_the_cap_all_is_kept_and_past_it_the_head_and_the_end(size: int) -> None:
    data = random.Random(size).randbytes(size)
    pieces = random.Random(7)
    chunks, at = [], 0
    while at < size:  # pieces of 1 to 40 bytes: the head's and the end's edges fall inside them
        step = pieces.randint(1, 40)
        chunks.append(data[at : at + step])
        at += step
    kept = _written(100, chunks)
    if size <= 100:
        assert kept == data
        return
    marker = b"\n[... %d bytes of the transcript cut by llmtt ...]\n" % (size - 100)
    assert kept == data[:50] + marker + data[-50:]


def test_one_write_larger_than_the_cap_is_cut_too() -> None:
    assert _written(10, [b"0123456789" * 3]) == (
        b"01234\n[... 20 bytes of the transcript cut by llmtt ...]\n56789"
    )


def test_an_agent_printing_past_the_cap_leaves_its_head_and_end(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An oracle printing 3 MB into a transcript capped at 64 KiB (32 MiB in use): the file
    keeps the command and the first lines, a line saying what was cut, and the last lines; the
    events are read from the stream, not from the file, and keep their own cap."""
    monkeypatch.setattr(llmtt.execution.transcript, "MAX_TRANSCRIPT", 65536)
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/loud.yaml", "task: {prompt: Print.}\nsolution: ['seq 1 400000']\n")
    loaded = load_project(project.root)
    (run,) = build_plan(loaded, Selection()).runs
    assert execute_run(loaded, run)["status"] == "completed"
    text = (run.dir / "transcript.raw.txt").read_bytes()
    assert len(text) < 65536 + 100
    assert text.startswith(b"$ seq 1 400000\n1\r\n2\r\n3\r\n")
    assert text.endswith(b"399999\r\n400000\r\n")
    found = re.search(rb"\n\[\.\.\. (\d+) bytes of the transcript cut by llmtt \.\.\.\]\n", text)
    assert found is not None
    printed = len("$ seq 1 400000\n") + sum(len(f"{n}\r\n") for n in range(1, 400001))
    assert int(found.group(1)) == printed - 65536
    (result,) = [e for e in read_jsonl(run.dir / "events.jsonl") if e["event"] == "tool_result"]
    assert result["output"].endswith("399999\n400000\n") and "cut by llmtt" in result["output"]
