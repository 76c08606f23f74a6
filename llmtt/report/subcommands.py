"""The reports' per-subcommand table: what agents hit on each subcommand of the target across
the runs (calls, errors, retries after a failure, help), beside what `llmtt lint` found on it
(the results folder's lint.json, when there is one)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.evaluation.interaction import NO_SUBCOMMAND
from llmtt.plan.runs import LINT_FILE
from llmtt.util.atomic import read_json

Row = dict[str, Any]


def read_lint(results: Path) -> dict[str, Any] | None:
    """lint.json of the results folder, or None when `llmtt lint` has not written one (or it
    cannot be read: the table then goes without it)."""
    path = results / LINT_FILE
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except (LlmttError, OSError):  # damaged: the report goes on without lint's findings
        return None
    return data if isinstance(data, dict) else None


def by_subcommand(
    rows: list[Row], target_of: Mapping[str, str], lint: Mapping[str, Any] | None
) -> list[Row]:
    """Per target and subcommand the agents called, over the evaluated runs: runs that called
    it, calls, errors, retries after a failure, help calls, runs that asked its help, runs with
    a failed call on it; and lint's findings on it. `target_of`: a run id's target name. The
    most called first."""
    stats: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        if row.get("outcome") not in ("pass", "fail"):
            continue
        target = target_of.get(row["run_id"], "")
        subs = (row.get("metrics") or {}).get("by_subcommand") or {}
        for name, counts in subs.items():
            entry = stats[(target, name)]
            entry["runs"] += 1
            entry["calls"] += int(counts.get("count") or 0)
            entry["errors"] += int(counts.get("errors") or 0)
            entry["retries"] += int(counts.get("retries") or 0)
            entry["help"] += int(counts.get("help") or 0)
            entry["runs_help"] += bool(counts.get("help"))
            entry["runs_failed"] += bool(counts.get("errors"))
    findings: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for finding in (lint or {}).get("findings") or []:
        if finding.get("target") is not None:
            key = (finding["target"], finding.get("subcommand") or NO_SUBCOMMAND)
            findings[key].append(finding)
    out: list[Row] = []
    for (target, name), entry in stats.items():
        found = findings.get((target, name), [])
        out.append(
            {
                "target": target,
                "subcommand": name,
                **entry,
                # None: lint has not run (no lint.json), which is not "lint found nothing"
                "lint": None
                if lint is None
                else [
                    {"level": f["level"], "check": f["check"], "message": f["message"]}
                    for f in found
                ],
            }
        )
    out.sort(key=lambda s: (-s["calls"], s["target"], s["subcommand"]))
    return out
