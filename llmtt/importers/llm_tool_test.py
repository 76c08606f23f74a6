"""`llmtt import llm-tool-test SCENARIO.yaml...`: the seed project's scenario files
(specs/llm-tool-test/scenarios.md) as llmtt scenarios.

Most fields mean the same in both and carry over as written (name, description, tags, tier,
task, setup, scripts, evaluation's gates and judge, run, cost.max_usd); `template_folder`
becomes `fixture` (relative to the new file), `target: from_config` leaves the target to
llmtt.toml, and `tool_matrix` becomes the scenario's `matrix`. What has no equivalent is
reported for each file: `cost.cache: false` (llmtt re-runs what changed, and `doit forget`
what you name), a `tool_matrix` whose tools have different models (llmtt runs every agent with
every model: the union is kept), unknown fields. The result is validated as an llmtt scenario;
a file that does not validate is reported and not written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmtt.errors import ConfigError, LlmttError
from llmtt.importers.bashkit import Imported, dump_scenario
from llmtt.spec.gates import NAME_RE
from llmtt.spec.loading import read_yaml
from llmtt.spec.scenario import Scenario
from llmtt.spec.validation import problems_from

_SAME = ("description", "tags", "tier", "task", "setup", "scripts", "run")
_TARGET_FIELDS = ("binary", "command_pattern", "health_check", "env", "version_command")


def import_llm_tool_test(files: list[Path], out: Path, *, force: bool = False) -> Imported:
    """Write one llmtt scenario per seed scenario file; never overwrite without `force`."""
    result = Imported()
    for path in files:
        try:
            data, _ = read_yaml(path)
        except ConfigError as exc:
            result.problems.extend(f"{p}; not imported" for p in exc.problems)
            continue
        if not isinstance(data, dict):
            result.problems.append(f"{path}: not a YAML mapping; not imported")
            continue
        notes: list[str] = []
        scenario = _convert(data, path, out, notes)
        target = out / f"{scenario['name']}.yaml"
        try:
            Scenario.model_validate(scenario)
        except ValidationError as exc:
            for problem in problems_from(exc, Scenario, path, {}, scenario):
                field = f"{problem.field}: " if problem.field else ""
                result.problems.append(f"{path}: {field}{problem.message}; not imported")
            continue
        if target.exists() and not force:
            result.problems.append(f"{path}: {target} exists (use --force to replace it)")
            continue
        out.mkdir(parents=True, exist_ok=True)
        dump_scenario(
            target, scenario, f"Imported from {path.name} by `llmtt import llm-tool-test`."
        )
        result.written.append(target)
        result.warnings.extend(f"{path}: {note}" for note in notes)
    return result


def _convert(data: dict[str, Any], path: Path, out: Path, notes: list[str]) -> dict[str, Any]:
    """The llmtt scenario of a seed scenario; what does not carry over goes to `notes`."""
    scenario: dict[str, Any] = {"name": _name(data.get("name"), path, notes)}
    scenario.update({k: data[k] for k in _SAME if k in data})
    target = data.get("target")
    if isinstance(target, dict):
        scenario["target"] = {k: v for k, v in target.items() if k in _TARGET_FIELDS}
        dropped = sorted(set(target) - set(_TARGET_FIELDS))
        if dropped:
            notes.append(f"target fields not carried over: {', '.join(dropped)}")
    elif target == "from_config":
        notes.append("target: from_config: the scenario uses llmtt.toml's [target]")
    elif target is not None:
        scenario["target"] = target  # a named [targets.X] table in llmtt
    folder = data.get("template_folder")
    if isinstance(folder, str):
        fixture = (path.parent / folder).resolve()
        if not fixture.is_dir():
            notes.append(f"template_folder {folder!r}: {fixture} is not a folder")
        scenario["fixture"] = Path(os.path.relpath(fixture, out.resolve())).as_posix()
    evaluation = data.get("evaluation")
    if evaluation is not None:
        scenario["evaluation"] = evaluation  # the same gates, judge and composite
    matrix = _matrix(data.get("tool_matrix"), notes)
    if matrix:
        scenario["matrix"] = matrix
    cost = data.get("cost")
    if isinstance(cost, dict):
        if "max_usd" in cost:
            scenario["cost"] = {"max_usd": cost["max_usd"]}
        if cost.get("cache") is False:
            notes.append(
                "cost.cache: false has no equivalent: llmtt re-runs only what changed "
                "(`doit forget <run>` makes a run pending again)"
            )
        extra = sorted(set(cost) - {"max_usd", "cache"})
        if extra:
            notes.append(f"cost fields not carried over: {', '.join(extra)}")
    known = {"name", "target", "template_folder", "evaluation", "tool_matrix", "cost", *_SAME}
    unknown = sorted(set(data) - known)
    if unknown:
        notes.append(f"fields not carried over: {', '.join(unknown)}")
    return scenario


def _name(name: Any, path: Path, notes: list[str]) -> str:
    """The seed's name when llmtt accepts it as one, else the file's."""
    if isinstance(name, str) and NAME_RE.match(name):
        return name
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-.") or "scenario"
    if name is not None:
        notes.append(f"name {name!r} is not a usable scenario name: named {stem!r}")
    return stem


def _matrix(tools: Any, notes: list[str]) -> dict[str, list[str]]:
    """`tool_matrix` as llmtt's matrix: the agents, and the union of their models."""
    if not isinstance(tools, list):
        if tools is not None:
            notes.append("tool_matrix is not a list: not carried over")
        return {}
    agents: list[str] = []
    models: list[str] = []
    per_tool: list[set[str]] = []
    for entry in tools:
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str):
            notes.append(f"tool_matrix entry {entry!r} has no tool: left out")
            continue
        agents.append(entry["tool"])
        own = [str(m) for m in entry.get("models") or []]
        per_tool.append(set(own))
        models.extend(m for m in own if m not in models)
    if len({frozenset(s) for s in per_tool}) > 1:
        notes.append(
            "tool_matrix gives its tools different models; llmtt runs every agent with every "
            f"model: {', '.join(agents)} x {', '.join(models)}"
        )
    out: dict[str, list[str]] = {}
    if agents:
        out["agents"] = agents
    if models:
        out["models"] = models
    return out


def check_files(files: list[Path]) -> None:
    """Every file given exists (else one clear error before anything is written)."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise LlmttError(f"no such scenario file: {', '.join(missing)}")
