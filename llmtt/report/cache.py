"""The aggregate's memory of each run's report row and panel.

The aggregate shows every run: its row (result.json) and its panel, which report.html reads
from report-runs/ (gates, metrics, the event timeline, the transcript's end), all redacted.
Made afresh each time, that is five files read and redacted and a panel rendered per run, 3.4 s
at 10,000 runs, however few of them changed. A run's row and panel change only when its
result.json is written again (its task writes it last, after its evaluation and judge) or its
scenario's `expect` is edited, so the aggregate keeps them, redacted, with the panel's HTML, in
`<results>/.llmtt-cache/report-runs.db`, each under the mtime, size and inode of the result.json
it was made from and the `expect` (and `split`) it was read against; and all of them only while
llmtt's code, the panel's template and the secrets llmtt knows are the same (a new secret, or a
new way to find one, makes them again). A damaged, locked or read-only cache is left aside: the
aggregate then makes every row and panel, as without it.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtt.plan.keys import ATTEMPTS, TRIAGE_FILE
from llmtt.plan.runs import Run
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
    the run has a result.json). `template`: what tells the panel's template from another.

    What the cache holds serves only if it was made for the same secrets, which a slow salted
    hash tells (~25 ms): the hash is worked out in a thread (it leaves the interpreter free)
    while the runs that the cache cannot serve anyway are made."""
    cache = _open(results_dir / ".llmtt-cache" / "report-runs.db", redact, template)
    known: dict[str, tuple[str, str, str, str]] = {}
    if cache is not None:
        try:
            known = {
                r[0]: r[1:]
                for r in cache.conn.execute("SELECT run_id, stamp, row, panel, html FROM runs")
            }
        except sqlite3.Error:
            cache.close()
            cache = None
    out: list[Made | None] = []
    made: list[tuple[str, str, str, str, str]] = []
    kept: list[int] = []  # where `out` waits for a kept row the secrets' check must confirm
    for run in runs:
        stamp = _stamp(run)  # before the file is read: a newer one is missed, never mixed
        hit = known.get(run.run_id)
        if stamp is not None and hit is not None and hit[0] == stamp:
            kept.append(len(out))
            out.append(None)
        else:
            out.append(_make(run, stamp, redact, build, render, made))
    serves = cache is not None and cache.same_secrets()
    if cache is not None and not serves:
        cache = cache.renew()  # made for other secrets: nothing of it serves
    for at in kept:
        run = runs[at]
        hit = known[run.run_id]
        if serves:
            out[at] = Made(json.loads(hit[1]), hit[2], hit[3])
        else:
            out[at] = _make(run, hit[0], redact, build, render, made)
    if cache is not None:
        planned = {run.run_id for run in runs}
        gone = [
            (run_id,)
            for run_id in known.keys() - planned
            if not (results_dir / run_id / "result.json").exists()
        ]
        try:
            with cache.conn:
                cache.conn.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", made)
                cache.conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
        except sqlite3.Error:
            pass  # kept next time, then
        cache.close()
    return [m for m in out if m is not None]


def _make(
    run: Run,
    stamp: str | None,
    redact: Redactor,
    build: Build,
    render: Render,
    made: list[tuple[str, str, str, str, str]],
) -> Made:
    """A run's part made anew, and put in `made` to be kept when it has a result.json."""
    row, panel = build(run)
    row, panel = redact.value(row), redact.value(panel)
    html = render(row, panel)
    panel_json = json.dumps(panel)
    if stamp is not None:
        made.append((run.run_id, stamp, json.dumps(row), panel_json, html))
    return Made(row, panel_json, html)


class _Cache:
    """An open cache whose code and template are this aggregate's, and the hash of the secrets
    it is for (worked out in a thread from the moment it is opened)."""

    def __init__(self, conn: sqlite3.Connection, meta: dict[str, str], redact: Redactor) -> None:
        self.conn = conn
        self.meta = meta
        self._salt = bytes.fromhex(meta["salt"])
        self._hash: list[str] = []
        self._hashing = threading.Thread(target=self._work_out, args=(redact,), daemon=True)
        self._hashing.start()

    def _work_out(self, redact: Redactor) -> None:
        try:
            self._hash.append(redact.fingerprint(self._salt))
        except Exception:  # noqa: BLE001 - e.g. a secret that is not UTF-8: no hash, no cache
            pass  # (and no traceback of the thread's, which could show a piece of the secret)

    def secrets(self) -> str | None:
        """The hash of the secrets this aggregate knows, with the cache's salt; None when it
        could not be made."""
        self._hashing.join()
        return self._hash[0] if self._hash else None

    def same_secrets(self) -> bool:
        """Whether the kept rows were redacted for the secrets known now."""
        known = self.secrets()
        return known is not None and self.meta.get("secrets") == known

    def renew(self) -> _Cache | None:
        """The cache emptied and marked as made for the secrets known now; None (closed) when
        that cannot be done, the hash of the secrets included."""
        known = self.secrets()
        try:
            if known is None:
                raise ValueError("no hash of the secrets")
            with self.conn:  # the table too: another format may have other columns
                self.conn.execute("DROP TABLE runs")
                self.conn.executescript(SCHEMA)
                self.meta["secrets"] = known
                self.conn.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)", self.meta.items()
                )
        except (sqlite3.Error, ValueError):
            self.close()
            return None
        return self

    def close(self) -> None:
        """Closed, once its hash is done with."""
        self._hashing.join()
        self.conn.close()


def _stamp(run: Run) -> str | None:
    try:
        stat = os.stat(run.dir / "result.json")
    except OSError:
        return None
    stamp = f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{run.scenario.spec.expect}"
    try:  # what its lost attempts spent joins the row (a kill before the evaluation, a
        # record removed by the user)
        tried = os.stat(run.dir / ATTEMPTS)
        stamp += f":attempts:{tried.st_mtime_ns}:{tried.st_size}"
    except OSError:
        pass
    if run.triage is not None:  # the triage layer's answer joins the row (and is written later)
        try:
            answer = os.stat(run.dir / TRIAGE_FILE)
            stamp += f":triage:{answer.st_mtime_ns}:{answer.st_size}:{answer.st_ino}"
        except OSError:
            stamp += ":triage:none"
    # A row holds its scenario's split too; the default adds nothing, so stamps stay as were.
    return stamp + (":holdout" if run.scenario.spec.split == "holdout" else "")


def _open(path: Path, redact: Redactor, template: str) -> _Cache | None:
    """The cache, emptied when it was made by other code or templates (and, once its hash is
    known, for other secrets); None when it cannot be used (it is then removed if damaged, to
    be made again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=10)
    except (OSError, sqlite3.Error):
        return None
    try:
        conn.executescript(SCHEMA)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        salt = meta.get("salt", "")
        if len(salt) != 32 or salt.strip("0123456789abcdef"):  # none yet, or damaged
            salt = secrets.token_hex(16)
        wanted = {"format": str(FORMAT), "code": code_id(), "template": template, "salt": salt}
        if any(meta.get(key) != value for key, value in wanted.items()):
            with conn:  # the table too: another format may have other columns
                conn.execute("DROP TABLE runs")
                conn.executescript(SCHEMA)
                conn.execute("DELETE FROM meta")
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", wanted.items())
            meta = dict(wanted)  # no `secrets`: the check finds them different, and renews
    except sqlite3.DatabaseError as exc:
        conn.close()
        if not isinstance(exc, sqlite3.OperationalError):
            path.unlink(missing_ok=True)  # not a database (any more): made again next time
        return None
    return _Cache(conn, meta, redact)


@functools.cache
def code_id() -> str:
    """What tells this llmtt's rows, panels and redaction from another's: its version and the
    size and mtime of the modules that make them (every module of report/, found by its path:
    the renderers import this module, not the other way; those of evaluation/shell/, which tell
    a panel's target commands), of the redaction and of `printable`, which finishes what the
    report-runs/ files hold (their signatures hold this too)."""
    from llmtt import __version__, redaction
    from llmtt.evaluation import shell
    from llmtt.util import text

    parts = [__version__]
    here = sorted(Path(__file__).parent.glob("*.py"))
    commands = sorted(Path(str(shell.__file__)).parent.glob("*.py"))
    for path in (*here, *commands, Path(str(redaction.__file__)), Path(str(text.__file__))):
        stat = os.stat(path)
        parts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
    return " ".join(parts)
