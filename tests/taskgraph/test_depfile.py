"""The dependency file backend: doit's sqlite3 file, read in one query, same answers as doit's."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import DOIT, Project
from doit.dependency import JSONCodec, SqliteDB

from llmtt.errors import NoSpace
from llmtt.taskgraph.depfile import PreloadedSqliteDB, _connection, record_values


def _written(path: Path) -> None:
    db = SqliteDB(str(path), JSONCodec())
    db.set("a:agent", "llmtt_key", {"prompt": "1", "fixture": "2"})
    db.set("a:agent", "_values_:", {"status": "ok"})
    db.set("b", "checker_", "MD5Checker")
    db.dump()


def test_reads_what_doits_own_backend_reads(tmp_path: Path) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    ours, doits = PreloadedSqliteDB(str(path), JSONCodec()), SqliteDB(str(path), JSONCodec())
    for task, dep in [
        ("a:agent", "llmtt_key"),
        ("a:agent", "_values_:"),
        ("b", "checker_"),
        ("b", "absent"),
        ("never-saved", "llmtt_key"),
    ]:
        assert ours.get(task, dep) == doits.get(task, dep), (task, dep)
    assert ours.get("a:agent", "llmtt_key") == {"prompt": "1", "fixture": "2"}
    for task in ("a:agent", "b", "never-saved"):
        assert ours.in_(task) == doits.in_(task), task
    # Every row comes with the first lookup: after it, answers need no connection.
    fresh = PreloadedSqliteDB(str(path), JSONCodec())
    assert fresh.in_("a:agent")
    fresh._conn.close()
    assert not fresh.in_("c")
    assert fresh.get("b", "checker_") == "MD5Checker" and fresh.get("c", "x") is None


def test_writes_and_removals_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    db.set("c", "llmtt_key", {"k": "v"})
    db.remove("b")
    assert not db.in_("b") and db.get("b", "checker_") is None
    db.dump()
    rows = sqlite3.connect(path).execute("SELECT task_id FROM doit ORDER BY 1").fetchall()
    assert rows == [("a:agent",), ("c",)]
    again = PreloadedSqliteDB(str(path), JSONCodec())
    assert again.get("c", "llmtt_key") == {"k": "v"}
    again.remove_all()
    again.dump()
    assert sqlite3.connect(path).execute("SELECT count(*) FROM doit").fetchone() == (0,)


def test_a_project_keeps_its_state_in_that_file(project: Project) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "echo"\ncommand_pattern = "echo"\n')
    project.write(
        "scenarios/one.yaml",
        """\
        task: {prompt: Say hi.}
        solution: [echo hi > hi.txt]
        evaluation: {gates: [{type: file_exists, path: hi.txt}]}
        """,
    )
    assert project.doit("run").code == 0
    depfile = project.results() / ".doit.sqlite3"
    ids = {r[0] for r in sqlite3.connect(depfile).execute("SELECT task_id FROM doit")}
    assert {"one/oracle/r1:agent", "one/oracle/r1:evaluate", "one/oracle/r1"} <= ids
    assert project.doit("run").executed() == []


def test_rows_are_read_at_the_first_lookup_not_on_open(tmp_path: Path) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    assert db._cache == {} and db._rows == {}  # `doit list` opens the file and never looks
    assert db.get("b", "checker_") == "MD5Checker"
    # Every row, at the first lookup; only the looked-up task's is decoded (a run named in a
    # large project decodes its own rows, not the project's).
    assert db._cache.keys() == {"b"} and db._rows.keys() == {"a:agent"}
    db._conn.close()  # what was read answers without the file
    assert db.get("a:agent", "llmtt_key") == {"prompt": "1", "fixture": "2"}
    assert db._rows == {}


def test_a_damaged_row_is_said_at_every_lookup_naming_the_task_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row that is not doit's JSON ends the invocation with one line, and says so again at
    the next lookup: never taken for a task that never ran (a paid run carried out again)."""
    path = tmp_path / "deps.sqlite3"
    _written(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE doit SET task_data = '{\"llmtt_key\": ' WHERE task_id = 'a:agent'")
    db = PreloadedSqliteDB(str(path), JSONCodec())
    for _ in range(2):
        with pytest.raises(SystemExit) as ended:
            db.get("a:agent", "llmtt_key")
        assert ended.value.code == 2
        said = capsys.readouterr().err
        assert said.startswith(f"llmtt: {path}: the saved state of task a:agent is damaged")
        assert "`doit forget a:agent`" in said and said.count("\n") == 1
    assert db.get("b", "checker_") == "MD5Checker"  # the other rows are read as before


def test_a_value_set_before_any_lookup_keeps_the_rest_of_its_row(tmp_path: Path) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    db.set("a:agent", "llmtt_key", {"prompt": "9"})
    # doit's own backend would write back a row holding only the new value.
    again = PreloadedSqliteDB(str(path), JSONCodec())
    assert again.get("a:agent", "llmtt_key") == {"prompt": "9"}
    assert again.get("a:agent", "_values_:") == {"status": "ok"}


def test_every_change_is_on_disk_at_once_without_a_dump(tmp_path: Path) -> None:
    """doit dumps its dependency file only when it exits normally; a killed doit lost every
    task it had finished. Each set and removal is committed as it is made."""
    path = tmp_path / "deps.sqlite3"
    _written(path)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    db.set("c", "llmtt_key", {"k": "v"})
    db.remove("b")
    # No dump(), no close: what another process reads now is what a killed doit leaves.
    other = PreloadedSqliteDB(str(path), JSONCodec())
    assert other.get("c", "llmtt_key") == {"k": "v"} and not other.in_("b")
    db.remove_all()
    assert not PreloadedSqliteDB(str(path), JSONCodec()).in_("a:agent")


def test_a_saved_success_is_one_commit_and_whole_on_disk(tmp_path: Path) -> None:
    """doit saves a task's success as a run of values (its values first, its file list last):
    the row is committed once, whole, at the last; a save cut short is written by the next
    change or the dump."""
    from doit.dependency import Dependency, MD5Checker
    from doit.task import Task

    deps = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for dep in deps:
        dep.write_text(dep.name)
    path = tmp_path / "deps.sqlite3"
    manager = Dependency(PreloadedSqliteDB, str(path), checker_cls=MD5Checker)
    statements: list[str] = []
    manager.backend._conn.set_trace_callback(statements.append)
    task = Task("t", None, file_dep=[str(d) for d in deps])
    task.values = {"status": "ok"}
    manager.save_success(task)
    assert [s for s in statements if s.upper().startswith("COMMIT")] == ["COMMIT"]
    other = PreloadedSqliteDB(str(path), JSONCodec())  # what a kill right now leaves
    assert other.get("t", "_values_:") == {"status": "ok"}
    assert sorted(other.get("t", "deps:")) == [str(d) for d in deps]
    assert other.get("t", str(deps[1]))[1] == len("b.txt")
    # A save that stops short (its file list never set) is written by the next change.
    manager.backend.set("u", "_values_:", {"status": "ok"})
    assert not PreloadedSqliteDB(str(path), JSONCodec()).in_("u")
    manager.backend.set("v", "ignore:", "1")
    again = PreloadedSqliteDB(str(path), JSONCodec())
    assert again.get("u", "_values_:") == {"status": "ok"} and again.get("v", "ignore:") == "1"


def test_a_worker_records_its_values_into_the_row_doit_will_save(tmp_path: Path) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    record_values(str(path), "a:agent", {"status": "completed", "llmtt_key": {"k": "2"}})
    record_values(str(path), "new:agent", {"status": "error", "error": "x"})
    db = PreloadedSqliteDB(str(path), JSONCodec())
    assert db.get("a:agent", "_values_:") == {"status": "completed", "llmtt_key": {"k": "2"}}
    assert db.get("a:agent", "llmtt_key") == {"prompt": "1", "fixture": "2"}  # rest kept
    assert db.get("new:agent", "_values_:") == {"status": "error", "error": "x"}


def test_a_success_recorded_from_a_worker_is_one_doit_accepts_file_deps_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `record_values` writes for a task with file dependencies makes a real `doit run`
    treat the task as done, as if doit had saved it itself (the judge layer's case)."""
    (tmp_path / "in.txt").write_text("input\n")
    (tmp_path / "dodo.py").write_text(
        "DOIT_CONFIG = {'dep_file': 'deps.sqlite3', 'backend': 'llmtt-sqlite3'}\n"
        "def task_t():\n"
        "    return {'actions': ['echo ran >> ran.txt'], 'file_dep': ['in.txt'],\n"
        "            'uptodate': [lambda task, values: values.get('llmtt_key') == 'k']}\n"
    )

    def doit(*args: str) -> str:
        proc = subprocess.run(
            [DOIT, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    doit("list")  # creates the dependency file
    monkeypatch.chdir(tmp_path)  # a worker's file deps are relative to the dodo's folder
    record_values(str(tmp_path / "deps.sqlite3"), "t", {"llmtt_key": "k"}, ["in.txt"])
    assert doit("run", "t").startswith("-- t")  # up to date: not executed
    assert not (tmp_path / "ran.txt").exists()
    (tmp_path / "in.txt").write_text("changed\n")
    assert doit("run", "t").startswith(".  t")  # its file dependency is checked as doit would


def test_a_dependency_file_made_again_in_its_place_gets_the_records_written_after(
    tmp_path: Path,
) -> None:
    """record_values keeps its connection between records; a file replaced meanwhile (a
    project removed and made again where it was, in one process) is not written through the
    connection to the old one."""
    path = tmp_path / "deps.sqlite3"
    _written(path)
    record_values(str(path), "a:agent", {"status": "first"})
    path.unlink()
    _written(path)
    record_values(str(path), "a:agent", {"status": "second"})
    record_values(str(path), "b:agent", {"status": "third"})
    db = PreloadedSqliteDB(str(path), JSONCodec())
    assert db.get("a:agent", "_values_:") == {"status": "second"}
    assert db.get("b:agent", "_values_:") == {"status": "third"}


def test_a_forked_worker_records_through_its_own_connection(tmp_path: Path) -> None:
    import os

    path = tmp_path / "deps.sqlite3"
    _written(path)
    record_values(str(path), "parent:agent", {"status": "before"})  # a connection kept here
    pid = os.fork()
    if pid == 0:  # the worker
        try:
            record_values(str(path), "child:agent", {"status": "worker"})
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    record_values(str(path), "parent:agent", {"status": "after"})
    db = PreloadedSqliteDB(str(path), JSONCodec())
    assert db.get("child:agent", "_values_:") == {"status": "worker"}
    assert db.get("parent:agent", "_values_:") == {"status": "after"}


def test_records_to_many_dependency_files_in_one_process_keep_few_files_open(
    tmp_path: Path,
) -> None:
    """A long process (a test session, a notebook) that records into many projects' files one
    after another does not keep a connection, and its open files, for each."""
    import os

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    paths = [tmp_path / f"p{i}" / "deps.sqlite3" for i in range(40)]
    for path in paths:
        path.parent.mkdir()
        _written(path)
    record_values(str(paths[0]), "t:agent", {"n": 0})
    before = open_files()
    for n, path in enumerate(paths):
        record_values(str(path), "t:agent", {"n": n})
    assert open_files() <= before + 1
    record_values(str(paths[0]), "t:agent", {"n": "again"})  # back to the first one
    db = PreloadedSqliteDB(str(paths[0]), JSONCodec())
    assert db.get("t:agent", "_values_:") == {"n": "again"}
    assert PreloadedSqliteDB(str(paths[7]), JSONCodec()).get("t:agent", "_values_:") == {"n": 7}


def _held_to_its_size(conn: sqlite3.Connection) -> None:
    """A database that may not grow (no less than its size: held to it): SQLite answers a write
    that needs a page more with its own "database or disk is full", as on a full disk."""
    conn.execute("PRAGMA max_page_count = 1")


def test_a_full_disk_is_one_line_naming_the_file_never_a_damaged_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """doit's saves meet a full disk: one line naming the file, and the invocation ends; not
    the advice to move the file aside (every run it knows would be paid for again). What was
    saved before stays."""
    path = tmp_path / "deps.sqlite3"
    db = PreloadedSqliteDB(str(path), JSONCodec())
    db.set("done", "llmtt_key", {"k": "1"})
    _held_to_its_size(db._conn)
    with pytest.raises(SystemExit) as ended:
        db.set("next", "llmtt_key", {"k": "x" * 100_000})
    assert ended.value.code == 2
    line = f"llmtt: no space left on device writing {path}: free some space and run again\n"
    assert capsys.readouterr().err == line
    db.dump()  # doit closes it as the invocation ends: nothing more to say, nothing raised
    assert capsys.readouterr().err == ""
    assert PreloadedSqliteDB(str(path), JSONCodec()).get("done", "llmtt_key") == {"k": "1"}


def test_a_worker_that_finds_the_disk_full_fails_its_task_naming_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deps.sqlite3"
    _written(path)
    _held_to_its_size(_connection(str(path)))
    with pytest.raises(NoSpace, match=f"no space left on device writing {path}: free some"):
        record_values(str(path), "b:agent", {"status": "ok", "log": "x" * 100_000})
