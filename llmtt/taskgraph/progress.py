"""What `doit run` says while it works: doit's own lines for the tasks it executes, and llmtt's
line per run as its agent starts and ends (elapsed, turns, tokens, cost, the session's spend
against its budget), and one line when there was nothing to do.

doit calls the reporter in its main process, also with `-n N`, as it dispatches a task and as
its result comes back. `-v 0` or LLMTT_QUIET=1 leave doit's lines only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from doit.reporter import ExecutedOnlyReporter

from llmtt.util.text import printable


def quiet(verbosity: object) -> bool:
    """doit's verbosity 0 (`-v 0`, as doit parsed it), or LLMTT_QUIET=1."""
    return os.environ.get("LLMTT_QUIET") == "1" or verbosity == 0


class ProgressReporter(ExecutedOnlyReporter):  # type: ignore[misc]  # doit is untyped
    """doit's executed-only reporter with llmtt's progress lines (see the module)."""

    desc = "llmtt: a line per run and what was spent (doit's executed-only otherwise)"
    run_dirs: dict[str, Path] = {}  # set once per process by `configure`
    ledger: Path | None = None
    quiet = False

    @classmethod
    def configure(
        cls, run_dirs: dict[str, Path], ledger: Path | None, *, quiet: bool
    ) -> type[ProgressReporter]:
        """This invocation's reporter class (doit makes the instance)."""
        return type(
            "LlmttProgress", (cls,), {"run_dirs": run_dirs, "ledger": ledger, "quiet": quiet}
        )

    def __init__(self, outstream: Any, options: dict[str, Any]) -> None:
        super().__init__(outstream, options)
        self.executed = 0
        self.agents = 0
        self.started = time.monotonic()

    def execute_task(self, task: Any) -> None:
        """doit's line; for an agent layer, llmtt's start line."""
        super().execute_task(task)
        self.executed += 1
        run_id = _agent_run(task.name)
        if run_id is not None and run_id in self.run_dirs:
            self.agents += 1
            self._say(f"started {run_id} ({self._elapsed()} into this invocation)")

    def add_success(self, task: Any) -> None:
        """For an agent layer: how its run went."""
        super().add_success(task)
        run_id = _agent_run(task.name)
        if run_id is not None and run_id in self.run_dirs:
            self._say(f"{run_id}: {self._agent_line(self.run_dirs[run_id])}{self._spend()}")

    def complete_run(self) -> None:
        """doit's failures; then, when nothing ran, one line that says so."""
        super().complete_run()
        if self.executed == 0:
            self._say(f"{len(self.run_dirs)} runs up to date; nothing to do")
        elif self.agents:
            self._say(f"{self.agents} agent run(s) in {self._elapsed()}{self._spend()}")

    def _say(self, text: str) -> None:
        if not self.quiet:
            # A run's error may quote what its setup printed, terminal sequences and all.
            self.write(f"llmtt: {printable(text)}\n")
            flush = getattr(self.outstream, "flush", None)
            if flush is not None:
                flush()

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"

    def _agent_line(self, folder: Path) -> str:
        """`agent done in 3.2 s: 4 turns, 1,234 in / 56 out tokens, $0.0012` (or why not)."""
        try:
            info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "agent done (no run.json)"
        if info.get("status") == "error":
            return f"could not be carried out: {str(info.get('error'))[:200]}"
        figures = _usage(folder / "events.jsonl")
        duration = info.get("duration_secs")
        took = f" in {duration:.1f} s" if isinstance(duration, int | float) else ""
        if figures is None:
            return f"agent done{took}"
        turns, tokens_in, tokens_out, cost = figures
        money = "cost unknown" if cost is None else f"${cost:.4f}"
        return (
            f"agent done{took}: {turns} turn(s), {tokens_in:,} in / {tokens_out:,} out tokens, "
            f"{money}"
        )

    def _spend(self) -> str:
        if self.ledger is None:
            return ""
        try:
            state = json.loads(self.ledger.read_text(encoding="utf-8"))
            return f"; session spend ${float(state['spent']):.4f} of ${float(state['budget']):.2f}"
        except (OSError, ValueError, KeyError, TypeError):
            return ""


def _agent_run(task_name: str) -> str | None:
    """`s/oracle/r1:agent` -> `s/oracle/r1`."""
    return task_name.removesuffix(":agent") if task_name.endswith(":agent") else None


def _usage(events: Path) -> tuple[int, int, int, float | None] | None:
    """Turns, input and output tokens and cost of a run's events (docs/metrics.md)."""
    from llmtt.events import Usage, read_events, run_usage

    try:
        usages = [e for e in read_events(events) if isinstance(e, Usage)]
    except Exception:  # noqa: BLE001 - progress never breaks a run; the evaluation says why
        return None
    if not usages:
        return None
    totals = run_usage(usages)
    return totals.requests, totals.loop.input, totals.loop.output, totals.cost
