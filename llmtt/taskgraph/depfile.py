"""doit's sqlite3 dependency file, read in one query and written as each task succeeds.

doit's own `SqliteDB` looks each task up with its own SELECT when the task's status is first
checked: a no-op `doit run` over a thousand runs (three tasks each) spent a fifth of its time
on those queries. And it writes what ran only when doit exits normally: a `doit run` killed by
SIGKILL (or the OOM killer, or a closed laptop) forgot every run it had finished, and the next
invocation paid for them again. This backend keeps doit's file format and table, loads every
row at once at the first lookup (each decoded when its task is looked up), and commits each
change as doit makes it (write-ahead log, so a commit costs a log append, not a sync of the
whole file), a task's saved success as one commit. It is registered under the
`doit.BACKEND` entry point `llmtt-sqlite3`; doit imports every backend plugin at start-up, so
this module imports nothing but doit's own.

A full disk is said as such, in one line naming the file, and ends the invocation (nothing
more could be recorded): never taken for a damaged file, which would be moved aside and every
run it knew carried out, and paid for, again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from doit.dependency import DatabaseException, SqliteDB


class PreloadedSqliteDB(SqliteDB):  # type: ignore[misc]
    """doit's sqlite3 backend that reads every task's saved values at the first lookup.

    Commands that never look (`doit list`) never read; `doit run` reads once.
    """

    desc = "doit's sqlite3 file, every row read at once (llmtt)"

    def __init__(self, name: str, codec: Any, *, module_name: str | None = None) -> None:
        import sqlite3

        self._full = False  # a write found the disk full: the invocation is ending
        try:
            super().__init__(name, codec, module_name=module_name)
            # Readers (`doit list` beside a running `doit run`) never block the writer, and a
            # killed writer leaves the file as of its last commit.
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except (DatabaseException, sqlite3.Error) as exc:
            from llmtt.errors import damaged_database, no_space

            # doit's own error has SQLite's as its context
            error = exc if isinstance(exc, sqlite3.Error) else exc.__context__
            cause = str(exc).rsplit("Original error: ", 1)[-1]
            full = no_space(error, name) if error is not None else None
            if full is None and error is not None and _io_error_on_full_disk(error, name):
                full = no_space(OSError(errno.ENOSPC, "no space", name))
            if full is not None:
                message = str(full)
            elif error is not None and damaged_database(error):
                message = (
                    f"{name} is damaged ({cause}): it holds which runs are done. Move it aside "
                    f"(mv {name} {name}.damaged) and run again: the runs it knew run again"
                )
            else:
                message = f"cannot open {name}: {cause}"
            sys.stderr.write(f"llmtt: {message}\n")
            raise SystemExit(2) from None
        self._loaded = False
        self._rows: dict[str, str | None] = {}  # rows read from the file, not yet decoded
        self._saving: str | None = None  # the task whose success doit is saving

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write to the file: on a full disk, one line, and the invocation ends (what was
        committed before is kept; what was not stays pending)."""
        import sqlite3

        try:
            yield
        except sqlite3.Error as exc:
            from llmtt.errors import no_space

            full = no_space(exc, self.name)
            if full is None:
                raise
            self._full = True
            sys.stderr.write(f"llmtt: {full}\n")
            raise SystemExit(2) from None

    def _load(self) -> None:
        """Every row's text, in one query; each is decoded when its task is looked up. A
        `doit run` of a few named tasks in a project of thousands decodes only theirs, and the
        rows held meanwhile are strings, which the garbage collector never walks (decoded, the
        rows of 5,000 runs were ~60,000 objects that each full collection of a run's own work
        walked again)."""
        self._loaded = True
        # Read as text (the column's declared type would send each row through doit's
        # converter), in plain tuples (not doit's dict per row).
        cursor = self._conn.cursor()
        cursor.row_factory = None
        rows = cursor.execute("SELECT task_id, CAST(task_data AS TEXT) FROM doit")
        self._rows = dict(rows.fetchall())

    def _take(self, task_id: str) -> None:
        """The task's saved row into doit's cache, decoded (a task doit set before the first
        lookup keeps what was set, as with doit's backend)."""
        if not self._loaded:
            self._load()
        text = self._rows.get(task_id)
        if task_id not in self._cache:
            try:
                data = self.codec.decode(text) if text else {}
                if not isinstance(data, dict):
                    raise ValueError(f"a {type(data).__name__}, not an object")
            except ValueError as exc:
                # The row stays: dropped, each later lookup would find nothing, and the task
                # would count as never run (a paid run carried out again) without a word.
                sys.stderr.write(
                    f"llmtt: {self.name}: the saved state of task {task_id} is damaged ({exc}):"
                    f" `doit forget {task_id}` forgets it (the task then runs again)\n"
                )
                raise SystemExit(2) from None
            self._cache[task_id] = data
        self._rows.pop(task_id, None)

    def _get_task_data(self, task_id: str) -> dict[str, Any]:
        # Every saved task is in the rows read; one not there has nothing saved.
        self._take(task_id)
        data: dict[str, Any] = self._cache[task_id]
        return data

    def set(self, task_id: str, dependency: str, value: Any) -> None:
        """Store one value of a task and commit the task's row: at once, except while doit
        saves a task's success (its values first, its file list last), committed whole at
        that last value: one commit a task instead of one a value."""
        self._take(task_id)  # the row is rewritten whole: start from what the file holds
        if self._saving not in (None, task_id):
            self._write(self._saving)  # another task's save that stopped short
        super().set(task_id, dependency, value)
        if dependency == "_values_:":
            self._saving = task_id
        elif self._saving != task_id or dependency == "deps:":
            self._write(task_id)

    def _write(self, task_id: str) -> None:
        with self._writing():
            self._conn.execute(
                "INSERT OR REPLACE INTO doit VALUES (?, ?)",
                (task_id, self.codec.encode(self._cache[task_id])),
            )
            self._conn.commit()
        self._dirty.discard(task_id)
        if self._saving == task_id:
            self._saving = None

    def remove(self, task_id: str) -> None:
        """Forget a task's saved values, at once."""
        with self._writing():
            super().remove(task_id)
            self._conn.commit()
        self._rows.pop(task_id, None)
        if self._saving == task_id:
            self._saving = None

    def in_(self, task_id: str) -> bool:
        """Whether anything is saved for `task_id`."""
        if not self._loaded:
            self._load()
        return task_id in self._cache or task_id in self._rows

    def remove_all(self) -> None:
        """Remove every task's saved values, at once."""
        with self._writing():
            super().remove_all()
            self._conn.commit()
        self._loaded = True
        self._rows = {}

    def dump(self) -> None:
        """Save what is left and close the file (as the invocation ends); after a full disk
        was met, close only: it was said once, and nothing more can be saved."""
        if self._full:
            self._conn.close()
            return
        with self._writing():
            super().dump()


def record_values(
    dep_file: str, task_id: str, values: dict[str, Any], file_deps: Sequence[str] = ()
) -> None:
    """Save a task's success from the process that ran it, as doit's parent will save it.

    doit's parent process saves what a worker ran only after the worker's result reached it
    through a queue; a kill in between loses it. The layers that cost money (agent, judge)
    and the evaluate layer the judge depends on record their own success here first.
    `values` must be what doit will save as the task's values: its action's returned dict and
    its value savers' (llmtt_key); `file_deps` its file dependencies, saved with the state
    doit's MD5 checker gives them.
    """
    import json
    import os
    import sqlite3

    from doit.dependency import get_file_md5

    try:
        conn = _connection(dep_file)
        with conn:
            row = conn.execute(
                "SELECT CAST(task_data AS TEXT) FROM doit WHERE task_id = ?", (task_id,)
            ).fetchone()
            data = json.loads(row[0]) if row and row[0] else {}
            data["_values_:"] = values
            if file_deps:
                data["checker:"] = "MD5Checker"
                for dep in file_deps:
                    data[dep] = [os.path.getmtime(dep), os.path.getsize(dep), get_file_md5(dep)]
                data["deps:"] = list(file_deps)
            conn.execute("INSERT OR REPLACE INTO doit VALUES (?, ?)", (task_id, json.dumps(data)))
    except sqlite3.Error as exc:
        from llmtt.errors import no_space

        full = no_space(exc, dep_file)
        if full is None:
            raise
        raise full from None


# record_values' connection, one per process and thread: a run records two tasks, and a
# connection made for each cost more than the record. A forked worker, or another thread of
# the Ray executor, makes its own (SQLite's connections are neither for both sides of a fork
# nor, by default, for two threads). One is kept for the last file only, and made again when
# that file was replaced since (a project made again where another was, in one process),
# which the kept connection would still write to.
_CONNECTIONS: dict[tuple[int, int], tuple[Any, str, tuple[int, int]]] = {}


def saved_values(dep_file: str, task_id: str) -> dict[str, Any] | None:
    """The values saved for a task (None: it never ran, or `doit forget` forgot it)."""
    import json
    import sqlite3

    try:
        row = (
            _connection(dep_file)
            .execute("SELECT CAST(task_data AS TEXT) FROM doit WHERE task_id = ?", (task_id,))
            .fetchone()
        )
    except sqlite3.Error:
        return None  # no file or table yet: nothing saved
    values = json.loads(row[0]).get("_values_:") if row and row[0] else None
    return values if isinstance(values, dict) else None


def _connection(dep_file: str) -> Any:
    import os
    import sqlite3
    import threading

    key = (os.getpid(), threading.get_ident())
    try:
        stat = os.stat(dep_file)
        file = (stat.st_dev, stat.st_ino)
    except OSError:
        file = (0, 0)  # not there (yet): SQLite makes it; the next record looks again
    kept = _CONNECTIONS.get(key)
    if kept is not None and kept[1] == dep_file and kept[2] == file:
        return kept[0]
    if any(k[0] != key[0] for k in _CONNECTIONS):
        _CONNECTIONS.clear()  # a forked parent's: left to it, never closed or used here
    if kept is not None:
        kept[0].close()
    conn = sqlite3.connect(dep_file, timeout=30)
    # The file is in write-ahead-log mode (see PreloadedSqliteDB): NORMAL keeps the commit
    # through a kill of this process or its parent, without a disk sync per commit.
    conn.execute("PRAGMA synchronous=NORMAL")
    _CONNECTIONS[key] = (conn, dep_file, file)
    return conn


SQLITE_IOERR = 10
FULL_BYTES = 1 << 20  # free bytes under which an I/O error is the disk being full


def _io_error_on_full_disk(error: BaseException, name: str) -> bool:
    """SQLite's "disk I/O error" while opening on a disk with (next to) nothing free: WAL mode
    maps its shared-memory file, and on a full disk that fails as an I/O error, not as
    SQLITE_FULL (which of the two depends on how many bytes are left)."""
    code = getattr(error, "sqlite_errorcode", None)
    if not isinstance(code, int) or code & 0xFF != SQLITE_IOERR:
        return False
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(name)))
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < FULL_BYTES
