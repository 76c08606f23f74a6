"""Result records: one per evaluated run, in the run folder and appended to results.jsonl."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from llmtt.errors import damaged_database, no_space
from llmtt.redaction import Redactor

if TYPE_CHECKING:
    import sqlite3


def append_result(path: Path, record: dict[str, Any], redact: Redactor) -> None:
    """Append one record, redacted, to results.jsonl and bring results.db up to date with it,
    under an exclusive lock (parallel doit workers share both)."""
    record = redact.value(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n"
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            _drop_torn_tail(handle)
            _catch_up(path, handle)
            if _recorded(path.with_suffix(".db"), record):
                return  # this evaluation was appended before a kill kept doit from saving it
            handle.write(line)
            handle.flush()
            _catch_up(path, handle)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def append_evaluation(path: Path, record: dict[str, Any], redact: Redactor) -> None:
    """Append a run's evaluator results to evaluations.jsonl (before its results.jsonl line:
    a kill between the two may repeat this line, with the same `evaluation_id`, never lose
    it), unless results.jsonl holds this evaluation as the run's latest record."""
    line = json.dumps(redact.value(record), ensure_ascii=False, default=str).encode() + b"\n"
    results = path.with_name("results.jsonl")
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            _drop_torn_tail(handle)
            if results.exists():
                sync_results_db(results)
                if _recorded(results.with_suffix(".db"), record):
                    return
            handle.write(line)
            handle.flush()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _recorded(db: Path, record: dict[str, Any]) -> bool:
    """Whether results.db (caught up) holds this evaluation as the run's latest record: the
    same evaluation appended before a kill kept doit from saving it. An evaluation that returns
    to an earlier one (a gate edited, then edited back) is the run's current result again, and
    so a new record."""
    import sqlite3

    evaluation = record.get("evaluation_id")
    if evaluation is None:
        return False
    try:
        row = (
            _connection(db)
            .execute(
                "SELECT json_extract(record, '$.evaluation_id') FROM results WHERE run_id = ? "
                "ORDER BY id DESC LIMIT 1",
                (record.get("run_id", ""),),
            )
            .fetchone()
        )
    except sqlite3.Error as exc:
        raise _failed(exc, db) from None
    return row is not None and row[0] == evaluation


def sync_results_db(path: Path) -> None:
    """Bring results.db up to date with results.jsonl (after a writer was killed between the
    two, or when results.db was deleted: it is rebuilt)."""
    if not path.exists():
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            _drop_torn_tail(handle)
            _catch_up(path, handle)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _drop_torn_tail(handle: BinaryIO) -> None:
    """A last line without its newline is a record a killed writer left half-written."""
    size = handle.seek(0, os.SEEK_END)
    if size == 0:
        return
    handle.seek(size - 1)
    if handle.read(1) == b"\n":
        return
    end = size
    while end > 0:
        start = max(0, end - (1 << 16))
        handle.seek(start)
        cut = handle.read(end - start).rfind(b"\n")
        if cut >= 0:
            handle.truncate(start + cut + 1)
            break
        end = start
    else:
        handle.truncate(0)
    handle.seek(0, os.SEEK_END)


# results.db: one row per evaluated run, history kept across invocations. `record` holds the
# whole JSON record (metrics included) for queries the columns do not cover.
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,          -- ISO 8601, UTC
    run_id TEXT NOT NULL,             -- <scenario>/<agent>[-<model>][-<variant>]/r<k>
    scenario TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT,
    variant TEXT,
    repeat INTEGER NOT NULL,
    outcome TEXT NOT NULL,            -- pass | fail
    outcome_reason TEXT,
    gates_passed INTEGER,
    gates_total INTEGER,
    judge_score REAL,
    cost_usd REAL,                    -- agent cost; null when unknown
    input_tokens INTEGER,
    output_tokens INTEGER,
    duration_secs REAL,
    agent_version TEXT,
    target_version TEXT,
    record TEXT NOT NULL,             -- the full JSON record
    point TEXT                        -- its `doit run` (POINT_OF): a point of the history
);
CREATE INDEX IF NOT EXISTS results_run ON results (run_id, timestamp);
CREATE INDEX IF NOT EXISTS results_group ON results (scenario, agent, model, variant);
CREATE TABLE IF NOT EXISTS llmtt_meta (key TEXT PRIMARY KEY, value TEXT);
-- The history (llmtt.results.trends), kept as records come so that a report reads a few rows
-- a point, however many records came before: each point by its first pass or fail record;
-- each run's last record in a point; and per point and group, those records summed (runs,
-- passed, cost, how many had a cost, the newest record's id).
CREATE TABLE IF NOT EXISTS points (point TEXT PRIMARY KEY, first_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS points_order ON points (first_id);
CREATE TABLE IF NOT EXISTS point_runs (
    point TEXT NOT NULL, run_id TEXT NOT NULL, id INTEGER NOT NULL, outcome TEXT NOT NULL,
    cost REAL, scenario TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL,
    variant TEXT NOT NULL, PRIMARY KEY (point, run_id));
CREATE INDEX IF NOT EXISTS point_runs_group
    ON point_runs (point, scenario, agent, model, variant, id);
CREATE TABLE IF NOT EXISTS point_groups (
    point TEXT NOT NULL, scenario TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL,
    variant TEXT NOT NULL, runs INTEGER NOT NULL, passed INTEGER NOT NULL, cost REAL NOT NULL,
    priced INTEGER NOT NULL, last_id INTEGER NOT NULL,
    PRIMARY KEY (point, scenario, agent, model, variant));
-- An evaluated run appears once per evaluation (a gate edited, a rubric changed): `attempts`
-- keeps the latest evaluation of each agent attempt (a run and its agent key), for trends;
-- `latest` the latest evaluation of each run, its current result.
CREATE VIEW IF NOT EXISTS attempts AS SELECT * FROM results WHERE id IN (
    SELECT max(id) FROM results
    GROUP BY run_id, coalesce(json_extract(record, '$.attempt_id'), json_extract(record, '$.key')));
CREATE VIEW IF NOT EXISTS latest AS SELECT * FROM results WHERE id IN (
    SELECT max(id) FROM results GROUP BY run_id);
"""


def _catch_up(path: Path, handle: BinaryIO) -> None:
    """Insert into results.db the lines of results.jsonl past the offset it has reached.

    results.jsonl is the record; results.db mirrors it, and keeps in `llmtt_meta` how many
    bytes of it are in. One transaction: a kill leaves results.db as before, to catch up next
    time. A results.jsonl shorter than that offset (rewritten by hand) rebuilds results.db; so
    does a damaged results.db, once set aside (`_set_aside`).
    """
    import sqlite3

    db = path.with_suffix(".db")
    try:
        try:
            _insert_new_lines(db, handle)
        except sqlite3.DatabaseError as exc:
            if not damaged_database(exc):
                raise
            _set_aside(db, exc)
            _insert_new_lines(db, handle)
    except sqlite3.Error as exc:  # e.g. its folder made read-only: say which file
        raise _failed(exc, db) from None
    handle.seek(0, os.SEEK_END)


def _set_aside(db: Path, exc: Exception) -> None:
    """Move a damaged results.db (with its write-ahead log) to results.db.damaged-<when>,
    saying so; the catch-up then makes it again from results.jsonl, which holds every record.
    Without this every evaluation after the damage failed on it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = db.with_name(f"{db.name}.damaged-{stamp}")
    for n in range(2, 100):
        if not aside.exists():
            break
        aside = db.with_name(f"{db.name}.damaged-{stamp}-{n}")
    for part in ("", "-wal", "-shm"):  # a log left beside a new results.db would be read into it
        try:
            os.replace(f"{db}{part}", f"{aside}{part}")
        except FileNotFoundError:
            pass
    sys.stderr.write(
        f"llmtt: {db} was damaged ({exc}): moved aside to {aside.name} and made again "
        "from results.jsonl\n"
    )


def _failed(exc: Exception, db: Path) -> OSError:
    """SQLite's error on results.db as an OSError naming the file (a full disk as such)."""
    return OSError(errno.ENOSPC if no_space(exc) else errno.EIO, str(exc), str(db))


# One connection per results.db and thread (a forked doit worker opens its own; so does each
# thread of a `-P thread` run, as SQLite connections stay in their thread), by (process, thread,
# path): opened again when the file was replaced or deleted, and the schema made again when
# another hand changed it (SQLite's schema_version moved).
_CONNECTIONS: dict[tuple[int, int, str], tuple[int, int, sqlite3.Connection]] = {}


def _connection(db: Path) -> sqlite3.Connection:
    import sqlite3

    key = (os.getpid(), threading.get_ident(), str(db))
    cached = _CONNECTIONS.get(key)
    try:
        inode = os.stat(db).st_ino
    except FileNotFoundError:
        inode = None
    if cached is not None and cached[0] == inode:
        conn = cached[2]
        if conn.execute("PRAGMA schema_version").fetchone()[0] == cached[1]:
            return conn
    else:
        if cached is not None:
            cached[2].close()
        conn = sqlite3.connect(db, timeout=30)
    # results.jsonl is the record and results.db its mirror, rebuilt from it when behind: a
    # write-ahead log synced only at checkpoints keeps every commit through a killed process
    # (not through a power cut, which the catch-up repairs) without two disk syncs a commit.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA)
    _add_points(conn)
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    _CONNECTIONS[key] = (os.stat(db).st_ino, version, conn)
    return conn


# A record's point of the history: the `doit run` that evaluated it (`invocation`: when it
# began, or the user's LLMTT_LABEL), else, for records older than that field, its day.
POINT_OF = "coalesce(json_extract(record, '$.invocation'), substr(timestamp, 1, 10))"


def _add_points(conn: sqlite3.Connection) -> None:
    """Give a results.db made before the history was kept its history, once: its records'
    points read from their JSON, then the three tables filled from them."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
    if "point" in columns:
        return
    with conn:
        conn.execute("ALTER TABLE results ADD COLUMN point TEXT")
        conn.execute(f"UPDATE results SET point = {POINT_OF}")
        for table in ("points", "point_runs", "point_groups"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute(
            "INSERT INTO points (point, first_id) SELECT point, min(id) FROM results "
            "WHERE outcome IN ('pass', 'fail') GROUP BY point"
        )
        conn.execute(
            "INSERT INTO point_runs SELECT point, run_id, id, outcome, cost_usd, scenario, "
            "agent, coalesce(model, ''), coalesce(variant, '') FROM results WHERE id IN "
            "(SELECT max(id) FROM results GROUP BY point, run_id)"
        )
        conn.execute(
            "INSERT INTO point_groups SELECT point, scenario, agent, model, variant, count(*), "
            "sum(outcome = 'pass'), sum(coalesce(cost, 0)), count(cost), max(id) "
            "FROM point_runs WHERE outcome IN ('pass', 'fail') "
            "GROUP BY point, scenario, agent, model, variant"
        )


def _keep_history(conn: Any, record: dict[str, Any], point: str, row_id: int) -> None:
    """The history's tables after one more record: it becomes its run's last in its point,
    taking the place of the one before in its group's sums."""
    outcome = record.get("outcome", "")
    cost = record.get("cost_usd")
    group = (
        point,
        record.get("scenario", ""),
        record.get("agent", ""),
        record.get("model") or "",
        record.get("variant") or "",
    )
    before = conn.execute(
        "SELECT outcome, cost, scenario, agent, model, variant FROM point_runs "
        "WHERE point = ? AND run_id = ?",
        (point, record.get("run_id", "")),
    ).fetchone()
    if before is not None and before[0] in ("pass", "fail"):
        # Its group without it: the sums, and the newest of the group's other runs' records.
        conn.execute(
            "UPDATE point_groups SET runs = runs - 1, passed = passed - :passed, "
            "cost = cost - :cost, priced = priced - :priced, last_id = coalesce((SELECT "
            "max(id) FROM point_runs WHERE point = :point AND scenario = :scenario AND "
            "agent = :agent AND model = :model AND variant = :variant AND outcome IN ('pass', "
            "'fail') AND run_id != :run_id), 0) WHERE point = :point AND scenario = :scenario "
            "AND agent = :agent AND model = :model AND variant = :variant",
            {
                "passed": before[0] == "pass",
                "cost": before[1] or 0.0,
                "priced": before[1] is not None,
                "point": point,
                "scenario": before[2],
                "agent": before[3],
                "model": before[4],
                "variant": before[5],
                "run_id": record.get("run_id", ""),
            },
        )
    conn.execute(
        "INSERT OR REPLACE INTO point_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (point, record.get("run_id", ""), row_id, outcome, cost, *group[1:]),
    )
    if outcome not in ("pass", "fail"):
        return
    conn.execute("INSERT OR IGNORE INTO points (point, first_id) VALUES (?, ?)", (point, row_id))
    conn.execute(
        "INSERT INTO point_groups VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?) "
        "ON CONFLICT (point, scenario, agent, model, variant) DO UPDATE SET "
        "runs = runs + 1, passed = passed + excluded.passed, cost = cost + excluded.cost, "
        "priced = priced + excluded.priced, last_id = max(last_id, excluded.last_id)",
        (*group, outcome == "pass", cost or 0.0, cost is not None, row_id),
    )


def results_connection(db: Path) -> sqlite3.Connection:
    """This process's connection to results.db, its schema up to date (OSError naming the
    file when SQLite fails)."""
    import sqlite3

    try:
        return _connection(db)
    except sqlite3.Error as exc:
        raise _failed(exc, db) from None


def _insert_new_lines(db: Path, handle: BinaryIO) -> None:
    with _connection(db) as conn:  # one transaction: committed, or rolled back on an error
        row = conn.execute("SELECT value FROM llmtt_meta WHERE key = 'jsonl_bytes'").fetchone()
        size = handle.seek(0, os.SEEK_END)
        if row is None:  # written before the offset was kept: its rows are the first lines
            rows = conn.execute("SELECT count(*) FROM results").fetchone()[0]
            handle.seek(0)
            offset = sum(len(handle.readline()) for _ in range(rows))
        else:
            offset = int(row[0])
        if offset == size and row is not None:
            return  # nothing new: no write, no sync
        if offset > size:
            for table in ("results", "points", "point_runs", "point_groups"):
                conn.execute(f"DELETE FROM {table}")
            offset = 0
        handle.seek(offset)
        for line in handle.read(size - offset).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # not a record: reading results.jsonl says where it is
            if isinstance(record, dict):
                _insert(conn, record)
        conn.execute(
            "INSERT OR REPLACE INTO llmtt_meta (key, value) VALUES ('jsonl_bytes', ?)", (size,)
        )


def _insert(conn: Any, record: dict[str, Any]) -> None:
    judge = record.get("judge") or {}
    tokens = record.get("tokens") or {}
    versions = record.get("versions") or {}
    row = (
        record.get("timestamp", ""),
        record.get("run_id", ""),
        record.get("scenario", ""),
        record.get("agent", ""),
        record.get("model"),
        record.get("variant"),
        record.get("repeat", 0),
        record.get("outcome", ""),
        record.get("outcome_reason"),
        record.get("gates_passed"),
        record.get("gates_total"),
        judge.get("weighted_score"),
        record.get("cost_usd"),
        tokens.get("input"),
        tokens.get("output"),
        record.get("duration_secs"),
        versions.get("agent"),
        versions.get("target"),
        json.dumps(record, default=str),
        record.get("invocation") or str(record.get("timestamp", ""))[:10],
    )
    cursor = conn.execute(
        "INSERT INTO results (timestamp, run_id, scenario, agent, model, variant, repeat, "
        "outcome, outcome_reason, gates_passed, gates_total, judge_score, cost_usd, "
        "input_tokens, output_tokens, duration_secs, agent_version, target_version, record, "
        "point) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        row,
    )
    _keep_history(conn, record, row[-1], cursor.lastrowid)


class ResultsStore:
    """The results store of a project: where an evaluation's records go (`Records` of
    `llmtt.evaluation.evaluate`), redacted, results.db kept up to date."""

    def __init__(self, results_dir: Path, redact: Redactor) -> None:
        self.results_dir = results_dir
        self.redact = redact

    def evaluation(self, line: dict[str, Any]) -> None:
        """A run's evaluator results, to evaluations.jsonl (see `append_evaluation`)."""
        append_evaluation(self.results_dir / "evaluations.jsonl", line, self.redact)

    def result(self, record: dict[str, Any]) -> None:
        """A run's result record, to results.jsonl and results.db (see `append_result`)."""
        append_result(self.results_dir / "results.jsonl", record, self.redact)
