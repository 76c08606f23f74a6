"""The aggregate's memory of each run's report row and panel.

The aggregate shows every run: its row (result.json) and its panel in report.html (gates,
metrics, the event timeline, the transcript's end), all redacted. Made afresh each time, that
is five files read and redacted per run, 2.4 s at 10,000 runs, however few of them changed. A
run's row and panel change only when its result.json is written again (its task writes it last,
after its evaluation and judge), so the aggregate keeps them, redacted, in
`<results>/.llmtt-cache/report-runs.db`, each under the mtime, size and inode of the result.json
it was made from; and all of them only while llmtt's code and the secrets it knows are the same
(a new secret, or a new way to find one, makes them again). A damaged, locked or read-only
cache is left aside: the aggregate then makes every row and panel, as without it.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmtt.plan import Run
from llmtt.redaction import Redactor

FORMAT = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, stamp TEXT NOT NULL, row TEXT NOT NULL, panel TEXT NOT NULL
);
"""

Row = dict[str, Any]
Build = Callable[[Run], tuple[Row, Row]]


def rows_and_panels(
    results_dir: Path, runs: Sequence[Run], redact: Redactor, build: Build
) -> list[tuple[Row, Row]]:
    """Each run's (row, panel), redacted: kept from an earlier aggregate where its result.json is
    the same file, else made by `build` (and kept, when the run has a result.json)."""
    path = results_dir / ".llmtt-cache" / "report-runs.db"
    conn = _open(path, redact)
    known: dict[str, tuple[str, str, str]] = {}
    if conn is not None:
        try:
            known = {
                r[0]: r[1:] for r in conn.execute("SELECT run_id, stamp, row, panel FROM runs")
            }
        except sqlite3.Error:
            conn = None
    out: list[tuple[Row, Row]] = []
    made: list[tuple[str, str, str, str]] = []
    for run in runs:
        stamp = _stamp(run.dir / "result.json")  # before the file is read: a newer one is missed
        hit = known.get(run.run_id)
        if stamp is not None and hit is not None and hit[0] == stamp:
            out.append((json.loads(hit[1]), json.loads(hit[2])))
            continue
        row, panel = build(run)
        row, panel = redact.value(row), redact.value(panel)
        if stamp is not None:
            made.append((run.run_id, stamp, json.dumps(row), json.dumps(panel)))
        out.append((row, panel))
    if conn is not None:
        planned = {run.run_id for run in runs}
        gone = [
            (run_id,)
            for run_id in known.keys() - planned
            if not (results_dir / run_id / "result.json").exists()
        ]
        try:
            with conn:
                conn.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)", made)
                conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
        except sqlite3.Error:
            pass  # kept next time, then
        conn.close()
    return out


def _stamp(path: Path) -> str | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}"


def _open(path: Path, redact: Redactor) -> sqlite3.Connection | None:
    """The cache, emptied when it was made by other code or with other secrets; None when it
    cannot be used (it is then removed if damaged, to be made again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=10)
    except (OSError, sqlite3.Error):
        return None
    try:
        conn.executescript(SCHEMA)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        salt = meta.get("salt") or secrets.token_hex(16)
        wanted = {
            "format": str(FORMAT),
            "code": _code(),
            "secrets": redact.fingerprint(bytes.fromhex(salt)),
            "salt": salt,
        }
        if any(meta.get(key) != value for key, value in wanted.items()):
            with conn:
                conn.execute("DELETE FROM runs")
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", wanted.items())
    except (sqlite3.DatabaseError, ValueError) as exc:
        conn.close()
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            path.unlink(missing_ok=True)  # not a database (any more): made again next time
        return None
    return conn


@functools.cache
def _code() -> str:
    """What tells this llmtt's rows, panels and redaction from another's: its version and the
    size and mtime of the modules that make them."""
    from llmtt import __version__, redaction, report

    parts = [__version__]
    for module in (report, redaction):
        stat = os.stat(str(module.__file__))
        parts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
    return " ".join(parts)
