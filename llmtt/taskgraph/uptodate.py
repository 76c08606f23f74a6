"""When a layer is up to date: its content key unchanged since it last ran (`KeyCheck`; the
judge's, `JudgeCheck`, lets a verdict stand whatever [judge] when says), and, for a run's visible
task under `doit list`/`doit info`, every layer of the run (`LayersDone`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doit.dependency import UptodateCalculator

from llmtt.util.hashing import Key


class KeyCheck:
    """`uptodate` for one layer: false when any part of its key changed, saying which."""

    # doit inspects every uptodate callable's signature on every status check; declaring it
    # here spares thousands of introspections on each load of a large plan.
    __signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("task", "values")]
    )

    def __init__(
        self, layer: str, key: Key, on_pending: Callable[[Any], None] | None = None
    ) -> None:
        self.layer = layer
        self.key = key
        self.reason = "not checked"
        self.on_pending = on_pending  # told of the task when it is found pending (warm.py)

    def __call__(self, task: Any, values: dict[str, Any]) -> bool:
        """Compare the key saved by the last successful execution with the current one."""
        task.value_savers.append(lambda: {"llmtt_key": self.key})
        saved = values.get("llmtt_key")
        if values.get("status") == "error":
            self.reason = f"the last attempt could not be carried out: {values.get('error')}"
            return False
        if saved is None:
            self.reason = "never run"
            self._found_pending(task)
            return False
        changed = sorted(k for k in set(self.key) | set(saved) if saved.get(k) != self.key.get(k))
        if changed:
            self.reason = "changed: " + ", ".join(changed)
            self._found_pending(task)
            return False
        self.reason = "unchanged"
        return True

    def _found_pending(self, task: Any) -> None:
        if self.on_pending is not None:
            self.on_pending(task)

    def __str__(self) -> str:
        return f"{self.layer} key ({self.reason})"

    __repr__ = __str__


class JudgeCheck(KeyCheck):
    """The judge layer's KeyCheck: a verdict the judge gave stands whatever [judge] when says
    now, so changing it asks only about the runs the judge was not asked about (and pays for
    nothing twice). A run settled before a judge error was the judge's (`judge.json`, format 1,
    with an error: then the agent's fail) is pending once, to be settled again."""

    def __init__(
        self,
        layer: str,
        key: Key,
        on_pending: Callable[[Any], None] | None = None,
        judged: str | None = None,
    ) -> None:
        super().__init__(layer, key, on_pending)
        self.judged = judged  # the run's judge.json

    def __call__(self, task: Any, values: dict[str, Any]) -> bool:
        saved = values.get("llmtt_key")
        if values.get("status") == "ok" and "rules" not in values and self._old_error():
            task.value_savers.append(lambda: {"llmtt_key": self.key})
            self.reason = "a judge error settled as the agent's fail before llmtt 2026-11-26"
            self._found_pending(task)
            return False
        if values.get("asked") and isinstance(saved, dict):
            mine = {k: v for k, v in saved.items() if k != "when"}
            if "when" in self.key:
                mine["when"] = self.key["when"]
            values = {**values, "llmtt_key": mine}
        return super().__call__(task, values)

    def _old_error(self) -> bool:
        """Whether the run's judge.json is an error of the first format."""
        import json

        if self.judged is None:
            return False
        try:
            with open(self.judged, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return False
        return isinstance(record, dict) and record.get("format") == 1 and bool(record.get("error"))


_FILE_REASONS = {
    "missing_target": "outputs missing",
    "changed_file_dep": "inputs changed",
    "missing_file_dep": "inputs not yet made",
}


class LayersDone(UptodateCalculator):  # type: ignore[misc]
    """`uptodate` for a run's visible task: true only when every layer is up to date."""

    def __init__(self, layers: list[str]) -> None:
        super().__init__()
        self.layers = layers
        self.pending: list[str] = []
        self._deps: Any = None

    def setup(self, dep_manager: Any, tasks_dict: dict[str, Any]) -> None:
        """Keep the dependency manager so the layers' own status can be asked."""
        super().setup(dep_manager, tasks_dict)
        self._deps = dep_manager

    def __call__(self) -> bool:
        """Up to date when no layer would run."""
        self.pending = []
        for name in self.layers:
            task = self.tasks_dict[name]
            status = self._deps.get_status(task, self.tasks_dict, get_log=True)
            if status.status != "up-to-date":
                why = [str(u) for u, _, _ in status.reasons.get("uptodate_false", [])]
                for reason, files in status.reasons.items():
                    if reason in _FILE_REASONS and files:
                        names = ", ".join(sorted({Path(f).name for f in files}))
                        why.append(f"{_FILE_REASONS[reason]}: {names}")
                self.pending.append(
                    f"{name.rsplit(':', 1)[-1]} ({'; '.join(why) or status.status})"
                )
        return not self.pending

    def __str__(self) -> str:
        return "pending layers: " + (", ".join(self.pending) or "none")

    __repr__ = __str__
