"""results.jsonl is the record and results.db its mirror: they agree whatever killed a writer
between the two, tore a line in half, or deleted or rewrote one of them."""

from __future__ import annotations

import errno
import json
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import Project

from llmtt.errors import no_space
from llmtt.redaction import Redactor
from llmtt.results.store import _connection, append_result, sync_results_db


def _record(n: int) -> dict[str, object]:
    return {"run_id": f"s/oracle/r{n}", "scenario": "s", "agent": "oracle", "outcome": "pass"}


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rows(path: Path, table: str = "results") -> list[dict[str, object]]:
    with sqlite3.connect(path.with_suffix(".db")) as conn:
        query = f"SELECT record FROM {table} ORDER BY id"
        rows = [json.loads(r[0]) for r in conn.execute(query)]
    conn.close()
    return rows


def test_a_line_torn_by_a_killed_writer_is_dropped_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, _record(1), Redactor())
    with open(path, "ab") as handle:
        handle.write(json.dumps(_record(2)).encode()[:25])  # killed mid-write: no newline
    append_result(path, _record(3), Redactor())
    assert [r["run_id"] for r in _lines(path)] == ["s/oracle/r1", "s/oracle/r3"]
    assert _rows(path) == _lines(path)


def test_a_record_that_reached_results_jsonl_but_not_results_db_is_caught_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, _record(1), Redactor())
    with open(path, "a") as handle:  # killed after the line, before the database
        handle.write(json.dumps(_record(2)) + "\n")
    assert len(_rows(path)) == 1
    sync_results_db(path)
    assert _rows(path) == _lines(path) and len(_rows(path)) == 2
    sync_results_db(path)  # once only
    append_result(path, _record(3), Redactor())
    assert _rows(path) == _lines(path) and len(_rows(path)) == 3


def test_a_deleted_or_stale_results_db_is_rebuilt_from_results_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    for n in range(3):
        append_result(path, _record(n), Redactor())
    path.with_suffix(".db").unlink()
    sync_results_db(path)
    assert _rows(path) == _lines(path) and len(_rows(path)) == 3
    # results.jsonl rewritten shorter by hand: the database follows it.
    path.write_text(json.dumps(_record(9)) + "\n")
    sync_results_db(path)
    assert _rows(path) == _lines(path) == [_record(9)]


def test_a_results_db_from_before_the_offset_was_kept_gets_only_the_missing_lines(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    for n in range(2):
        append_result(path, _record(n), Redactor())
    with sqlite3.connect(path.with_suffix(".db")) as conn:
        conn.execute("DROP TABLE llmtt_meta")
    conn.close()
    with open(path, "a") as handle:
        handle.write(json.dumps(_record(2)) + "\n")
    sync_results_db(path)
    assert _rows(path) == _lines(path) and len(_rows(path)) == 3


def test_an_evaluation_done_again_adds_no_second_record_but_a_new_one_does(
    project: Project,
) -> None:
    """A kill between the results.jsonl append and doit saving the evaluate layer made the
    next `doit run` evaluate again and append the same evaluation twice (here the layer is
    forgotten instead, which has the same effect)."""
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/s.yaml", SCENARIO.format(substring="hello"))
    assert project.doit("run").code == 0
    path = project.results() / "results.jsonl"
    first = _lines(path)
    assert len(first) == 1 and first[0]["evaluation_id"]
    assert project.doit("forget", "s/oracle/r1:evaluate").code == 0
    again = project.doit("run")
    assert again.executed()[:1] == ["s/oracle/r1:evaluate"], again.out
    assert _lines(path) == first and _rows(path) == first
    # A changed gate is a new evaluation of the same attempt: a new record.
    project.write("scenarios/s.yaml", SCENARIO.format(substring="hell"))
    assert project.doit("run").code == 0
    # And so is a new attempt of the agent (run.json is new) with the same keys.
    assert project.doit("forget", "s/oracle/r1:agent").code == 0
    assert project.doit("run").code == 0
    records = _lines(path)
    assert len(records) == 3 and len({r["evaluation_id"] for r in records}) == 3
    assert _rows(path) == records
    # The views: each agent attempt's latest evaluation, and each run's current result.
    assert records[0]["attempt_id"] == records[1]["attempt_id"] != records[2]["attempt_id"]
    assert _rows(path, "attempts") == records[1:]
    assert _rows(path, "latest") == records[2:]


SCENARIO = (
    "task: {{prompt: Say hello.}}\nsolution: ['echo hello > out.txt']\n"
    "evaluation:\n  gates:\n    - {{type: file_contains, path: out.txt, substring: {substring}}}\n"
)


def test_an_evaluation_that_returns_to_an_earlier_result_is_a_new_record(
    project: Project,
) -> None:
    """A gate edited and edited back evaluates the same attempt with the same keys as the first
    time: that is the run's current result all the same, so results.db's `latest` and the
    history must show it (they showed the edit's fail while result.json said pass)."""
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    for label, substring in (("v1", "hello"), ("v2", "bye"), ("v3", "hello")):
        project.write("scenarios/s.yaml", SCENARIO.format(substring=substring))
        ran = project.doit("run", env={"LLMTT_LABEL": label})
        assert "s/oracle/r1:evaluate" in ran.executed(), ran.out + ran.err
    path = project.results() / "results.jsonl"
    records = _lines(path)
    assert [r["outcome"] for r in records] == ["pass", "fail", "pass"]
    assert records[0]["evaluation_id"] == records[2]["evaluation_id"]
    assert _rows(path) == records
    current = project.json("s/oracle/r1/result.json")
    assert current["outcome"] == "pass" and project.json("report.json")["runs"][0] == {
        **current,
        "expect": "pass",
        "split": "tune",
        "verdict": "pass",
    }
    assert _rows(path, "latest") == [current]
    html = (project.results() / "report.html").read_text()
    history = html.split("<h2>History</h2>", 1)[1].split("<h2>", 1)[0]
    assert re.findall(r"<tr><td>(v\d)</td><td>1</td><td>(\d)</td>", history) == [
        ("v1", "1"),
        ("v2", "0"),
        ("v3", "1"),
    ]
    # Evaluated again with nothing changed (as after a kill): still no second line for it.
    assert project.doit("forget", "s/oracle/r1:evaluate").code == 0
    again = project.doit("run", env={"LLMTT_LABEL": "v4"})
    assert again.executed()[:1] == ["s/oracle/r1:evaluate"], again.out
    assert _lines(path) == records and _rows(path) == records


def test_a_full_disk_under_results_db_is_said_as_such_naming_it(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" (a real one: results.db held to its size) is the
    environment's ENOSPC naming results.db, which the layer reports as a full disk."""
    path = tmp_path / "results.jsonl"
    append_result(path, _record(1), Redactor())
    _connection(path.with_suffix(".db")).execute("PRAGMA max_page_count = 1")
    with pytest.raises(OSError) as raised:
        append_result(path, {**_record(2), "outcome_reason": "x" * 100_000}, Redactor())
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(path.with_suffix(".db"))
    assert str(no_space(raised.value)) == (
        f"no space left on device writing {path.with_suffix('.db')}: free some space and run again"
    )


def test_a_results_db_whose_header_is_damaged_is_set_aside_and_made_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite's "file is not a database" failed every evaluation after it: the damaged file is
    moved aside, kept to look at, and results.db made again from results.jsonl."""
    path = tmp_path / "results.jsonl"
    for n in (1, 2):
        append_result(path, _record(n), Redactor())
    db = path.with_suffix(".db")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the file itself
    conn.close()
    damaged = b"\0" * 100 + db.read_bytes()[100:]  # its first 100 bytes overwritten
    db.with_name("damaged").write_bytes(damaged)
    db.with_name("damaged").replace(db)
    append_result(path, _record(3), Redactor())
    assert [r["run_id"] for r in _rows(path)] == ["s/oracle/r1", "s/oracle/r2", "s/oracle/r3"]
    assert _rows(path) == _lines(path)
    # Its write-ahead log, when there is one, goes with it.
    aside, *log = sorted(tmp_path.glob("results.db.damaged-*"))
    assert aside.read_bytes() == damaged
    assert {p.name.removeprefix(aside.name) for p in log} <= {"-wal", "-shm"}
    said = capsys.readouterr().err
    assert f"llmtt: {db} was damaged (file is not a database): moved aside to {aside.name}" in said
