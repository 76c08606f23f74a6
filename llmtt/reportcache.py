"""The aggregate's memory of each run's report row and panel.

The aggregate shows every run: its row (result.json) and its panel in report.html (gates,
metrics, the event timeline, the transcript's end), all redacted. Made afresh each time, that
is five files read and redacted and a panel rendered per run, 3.4 s at 10,000 runs, however few
of them changed. A run's row and panel change only when its result.json is written again (its
task writes it last, after its evaluation and judge) or its scenario's `expect` is edited, so
the aggregate keeps them, redacted, with the panel's HTML, in
`<results>/.llmtt-cache/report-runs.db`, each under the mtime, size and inode of the result.json
it was made from and the `expect` it was read against; and all of them only while llmtt's code,
the panel's template and the secrets llmtt knows are the same (a new secret, or a new way to
find one, makes them again). A damaged, locked or read-only cache is left aside: the aggregate
then makes every row and panel, as without it.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtt.plan import Run
from llmtt.redaction import Redactor

FORMAT = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, stamp TEXT NOT NULL, row TEXT NOT NULL, panel TEXT NOT NULL,
    html TEXT NOT NULL
);
"""

Row = dict[str, Any]
Build = Callable[[Run], tuple[Row, Row]]  # a run's row and panel, not redacted
Render = Callable[[Row, Row], str]  # the HTML of a run's panel, from its redacted row and panel


@dataclass(frozen=True)
class Made:
    """A run's part of the reports, redacted: its row, its panel as JSON (read only by a
    template that asks for it), the panel's HTML."""

    row: Row
    panel: str
    html: str


def report_runs(
    results_dir: Path,
    runs: Sequence[Run],
    redact: Redactor,
    build: Build,
    render: Render,
    template: str,
) -> list[Made]:
    """Each run's part of the reports: kept from an earlier aggregate where its result.json is
    the same file and its `expect` the same, else made by `build` and `render` (and kept, when
    the run has a result.json). `template`: what tells the panel's template from another."""
    path = results_dir / ".llmtt-cache" / "report-runs.db"
    conn = _open(path, redact, template)
    known: dict[str, tuple[str, str, str, str]] = {}
    if conn is not None:
        try:
            known = {
                r[0]: r[1:]
                for r in conn.execute("SELECT run_id, stamp, row, panel, html FROM runs")
            }
        except sqlite3.Error:
            conn = None
    out: list[Made] = []
    made: list[tuple[str, str, str, str, str]] = []
    loads = json.loads
    for run in runs:
        stamp = _stamp(run)  # before the file is read: a newer one is missed, never mixed
        hit = known.get(run.run_id)
        if stamp is not None and hit is not None and hit[0] == stamp:
            out.append(Made(loads(hit[1]), hit[2], hit[3]))
            continue
        row, panel = build(run)
        row, panel = redact.value(row), redact.value(panel)
        html = render(row, panel)
        panel_json = json.dumps(panel)
        if stamp is not None:
            made.append((run.run_id, stamp, json.dumps(row), panel_json, html))
        out.append(Made(row, panel_json, html))
    if conn is not None:
        planned = {run.run_id for run in runs}
        gone = [
            (run_id,)
            for run_id in known.keys() - planned
            if not (results_dir / run_id / "result.json").exists()
        ]
        try:
            with conn:
                conn.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", made)
                conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
        except sqlite3.Error:
            pass  # kept next time, then
        conn.close()
    return out


def _stamp(run: Run) -> str | None:
    try:
        stat = os.stat(run.dir / "result.json")
    except OSError:
        return None
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{run.scenario.spec.expect}"


def _open(path: Path, redact: Redactor, template: str) -> sqlite3.Connection | None:
    """The cache, emptied when it was made by other code, templates or secrets; None when it
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
            "code": code_id(),
            "template": template,
            "secrets": redact.fingerprint(bytes.fromhex(salt)),
            "salt": salt,
        }
        if any(meta.get(key) != value for key, value in wanted.items()):
            with conn:  # the table too: another format may have other columns
                conn.execute("DROP TABLE runs")
                conn.executescript(SCHEMA)
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", wanted.items())
    except (sqlite3.DatabaseError, ValueError) as exc:
        conn.close()
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            path.unlink(missing_ok=True)  # not a database (any more): made again next time
        return None
    return conn


@functools.cache
def code_id() -> str:
    """What tells this llmtt's rows, panels and redaction from another's: its version and the
    size and mtime of the modules that make them."""
    from llmtt import __version__, redaction, report

    parts = [__version__]
    for module in (report, redaction):
        stat = os.stat(str(module.__file__))
        parts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
    return " ".join(parts)
