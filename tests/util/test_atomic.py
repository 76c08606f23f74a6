"""Atomic writes (llmtt/util/atomic.py): a reader sees the old file or the whole new one, also with
threads writing the same file (the Ray executor's actions run in threads)."""

from __future__ import annotations

import threading
from pathlib import Path

from llmtt.util.atomic import write_bytes, write_text


def test_threads_writing_one_file_each_leave_it_whole_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "result.json"
    payloads = [bytes([65 + n]) * 200_000 for n in range(8)]
    seen: set[bytes] = set()

    def writer(payload: bytes) -> None:
        for _ in range(30):
            write_bytes(path, payload)
            seen.add(path.read_bytes())

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen <= set(payloads) and path.read_bytes() in payloads
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_a_missing_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "report.md"
    write_bytes(path, b"# report\n")
    assert path.read_bytes() == b"# report\n"


def test_a_lone_surrogate_is_written_as_a_question_mark_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "evaluation.md"
    write_text(path, "cut \ud83d here, whole \U0001f600\n")
    assert path.read_text(encoding="utf-8") == "cut ? here, whole \U0001f600\n"
