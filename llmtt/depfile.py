"""doit's sqlite3 dependency file, read in one query instead of one query a task.

doit's own `SqliteDB` looks each task up with its own SELECT when the task's status is first
checked: a no-op `doit run` over a thousand runs (three tasks each) spent a fifth of its time
on those queries. This backend keeps doit's file format, table and write path and only loads
every row at once, at the first lookup. It is registered under the `doit.BACKEND` entry point
`llmtt-sqlite3`; doit imports every backend plugin at start-up, so this module imports nothing
but doit's own.
"""

from __future__ import annotations

from typing import Any

from doit.dependency import SqliteDB


class PreloadedSqliteDB(SqliteDB):  # type: ignore[misc]
    """doit's sqlite3 backend that reads every task's saved values at the first lookup.

    Commands that never look (`doit list`) never read; `doit run` reads once.
    """

    desc = "doit's sqlite3 file, every row read at once (llmtt)"

    def __init__(self, name: str, codec: Any, *, module_name: str | None = None) -> None:
        super().__init__(name, codec, module_name=module_name)
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        # Read as text and decoded with doit's codec here: the column's declared type would
        # otherwise send each row through doit's converter one call at a time.
        rows = self._conn.execute("SELECT task_id, CAST(task_data AS TEXT) AS data FROM doit")
        decode = self.codec.decode
        for row in rows:
            # A task set before the first lookup keeps what was set, as with doit's backend.
            self._cache.setdefault(row["task_id"], decode(row["data"]) if row["data"] else {})

    def _get_task_data(self, task_id: str) -> dict[str, Any]:
        if not self._loaded:
            self._load()
        # Every saved task is in the cache now; one not there has nothing saved.
        data: dict[str, Any] = self._cache.get(task_id, {})
        return data

    def in_(self, task_id: str) -> bool:
        """Whether anything is saved for `task_id`."""
        if not self._loaded:
            self._load()
        return task_id in self._cache

    def remove_all(self) -> None:
        """Remove every task's saved values."""
        super().remove_all()
        self._loaded = True
