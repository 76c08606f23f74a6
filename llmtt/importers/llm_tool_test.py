"""`llmtt import llm-tool-test SCENARIO.yaml...`: the seed project's scenario files
(specs/llm-tool-test/scenarios.md), and its successor ax-eval's, as llmtt scenarios.

Most fields mean the same in both and carry over as written (name, description, tags, task,
setup, scripts, evaluation's gates and judge, run, cost.max_usd); the seed's defaults are
written out where llmtt's differ (`tier: 0`, `run.timeout_secs: 300`). Paths are found where
the real projects find them: `template_folder` under the scenario file's `templates/` folder
first, a rubric beside the scenario file first (then the other places the seed and ax-eval
look). `template_folder` becomes `fixture` (relative to the new file), the rubric a path from
the llmtt project's folder, `target: from_config` leaves the target to llmtt.toml, and
`tool_matrix` becomes the scenario's `matrix`. The seed's retired domain gates (`MinNotes`,
...) become generic ones by its own migration table (`llmtt.importers.seed_gates`). What
changes or has no equivalent is reported for each file: `cost.cache: false`, a `tool_matrix`
whose tools have different models (llmtt runs every agent with every model: the union is kept)
or that names no llmtt agent, a health check written as `tool help` (many tools exit 1 on it),
unknown fields.

A file is written only when the scenario it makes validates and every path it names is there
(inside the project, unless [paths] allow_outside): otherwise it is reported with its line,
field and where the importer looked, and the command exits 1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmtt.errors import ConfigError, LlmttError
from llmtt.importers.bashkit import Imported, dump_scenario
from llmtt.importers.seed_gates import migrate_gate
from llmtt.spec.config import CONFIG_FILE, Config, TargetSpec, load_config
from llmtt.spec.gates import NAME_RE
from llmtt.spec.loading import Loc, dotted, line_of, read_yaml
from llmtt.spec.project import fixture_problem, known_agents
from llmtt.spec.rubric import load_rubric
from llmtt.spec.scenario import Scenario
from llmtt.spec.validation import problems_from

_SAME = ("description", "tags", "setup", "scripts")
_TARGET_FIELDS = ("binary", "command_pattern", "health_check", "env", "version_command")
# The seed's defaults where llmtt's differ (specs/llm-tool-test/scenarios.md, "Schema").
SEED_TIER = 0
SEED_TIMEOUT_SECS = 300


@dataclass
class _File:
    """One seed file being converted: where it is, where it goes, and what was found."""

    path: Path
    lines: dict[Loc, int]
    project: _Project
    out: Path
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def problem(self, loc: Loc, message: str) -> None:
        """A located reason the file cannot be imported."""
        self.problems.append(f"{self._at(loc)}{message}; not imported")

    def note(self, loc: Loc, message: str) -> None:
        """A located report of what changed, or has no equivalent (the file is imported)."""
        self.notes.append(f"{self._at(loc)}{message}")

    def _at(self, loc: Loc) -> str:
        """`path:line: field: ` of `loc` (`path: ` alone for the whole file)."""
        line = line_of(self.lines, loc) if loc else None
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        return f"{where}: {dotted(loc)}: " if loc else f"{where}: "


@dataclass(frozen=True)
class _Project:
    """The llmtt project the scenarios are written into: its folder and llmtt.toml."""

    root: Path
    config: Config | None

    @classmethod
    def of(cls, out: Path) -> _Project:
        """The project holding `out`: the nearest folder at or above it with llmtt.toml (else
        the current folder), and its config when it loads."""
        start = out.resolve()
        root = next((p for p in (start, *start.parents) if (p / CONFIG_FILE).is_file()), Path.cwd())
        try:
            config: Config | None = load_config(root)[0]
        except ConfigError:
            config = None
        return cls(root.resolve(), config)

    def outside(self, path: Path) -> bool:
        """Whether `path` (links followed) lies outside the project, and that is not allowed."""
        if self.config is not None and self.config.paths.allow_outside:
            return False
        return not Path(os.path.realpath(path)).is_relative_to(self.root)

    def target_of(self, target: Any) -> TargetSpec | None:
        """A scenario's target as llmtt will resolve it ([target] with the scenario's own, or
        a [targets.X] table); None when it is not one llmtt takes (validation says why)."""
        config = self.config or Config()
        try:
            if isinstance(target, dict):
                return config.target.merged(TargetSpec.model_validate(target))
        except ValidationError:
            return None
        if isinstance(target, str):
            named = config.targets.get(target)
            return None if named is None else config.target.merged(named)
        return config.target


def import_llm_tool_test(files: list[Path], out: Path, *, force: bool = False) -> Imported:
    """Write one llmtt scenario per seed scenario file; never overwrite without `force`."""
    result = Imported()
    project = _Project.of(out)
    for path in files:
        try:
            data, lines = read_yaml(path)
        except ConfigError as exc:
            result.problems.extend(f"{p}; not imported" for p in exc.problems)
            continue
        if not isinstance(data, dict):
            result.problems.append(f"{path}: not a YAML mapping; not imported")
            continue
        seed = _File(path, lines, project, out)
        scenario = _convert(data, seed)
        if seed.problems:
            result.problems.extend(seed.problems)
            continue
        target = out / f"{scenario['name']}.yaml"
        try:
            Scenario.model_validate(scenario)
        except ValidationError as exc:
            for problem in problems_from(exc, Scenario, path, {}, scenario):
                where = f"{problem.field}: " if problem.field else ""
                result.problems.append(f"{path}: {where}{problem.message}; not imported")
            continue
        if target.exists() and not force:
            result.problems.append(f"{path}: {target} exists (use --force to replace it)")
            continue
        out.mkdir(parents=True, exist_ok=True)
        dump_scenario(
            target, scenario, f"Imported from {path.name} by `llmtt import llm-tool-test`."
        )
        result.written.append(target)
        result.warnings.extend(seed.notes)
    return result


def _convert(data: dict[str, Any], seed: _File) -> dict[str, Any]:
    """The llmtt scenario of a seed scenario; what changes or does not carry over goes to
    `seed.notes`, what stops the import to `seed.problems`."""
    scenario: dict[str, Any] = {"name": _name(data.get("name"), seed)}
    scenario.update({k: data[k] for k in _SAME if k in data})
    scenario["tier"] = data.get("tier", SEED_TIER)
    task = data.get("task")
    scenario["task"] = {"prompt": task} if isinstance(task, str) else task
    if isinstance(task, str):
        seed.note(("task",), "a text, the older form: written as task.prompt")
    target = _target(data.get("target"), seed)
    if target is not None:
        scenario["target"] = target
    resolved = seed.project.target_of(target)
    if (
        seed.project.config is not None
        and resolved is not None
        and not (resolved.binary or resolved.command_pattern)
    ):
        seed.problem(
            ("target",),
            "no target tool: neither the file's target nor the [target] of "
            f"{seed.project.root / CONFIG_FILE} names a binary; set [target] binary there "
            "first, or give the file `target: {binary: ...}`",
        )
    fixture = _fixture(data.get("template_folder"), seed)
    if fixture is not None:
        scenario["fixture"] = Path(os.path.relpath(fixture, seed.out.resolve())).as_posix()
    evaluation = _evaluation(data, fixture, resolved, seed)
    if evaluation is not None:
        scenario["evaluation"] = evaluation
    matrix = _matrix(data.get("tool_matrix"), seed)
    if matrix:
        scenario["matrix"] = matrix
    run = data.get("run")
    scenario["run"] = {"timeout_secs": SEED_TIMEOUT_SECS, **(run if isinstance(run, dict) else {})}
    _cost(data.get("cost"), scenario, seed)
    known = {"name", "target", "template_folder", "evaluation", "gates", "tool_matrix", "cost"}
    unknown = sorted(set(data) - known - {"task", "tier", "run", *_SAME})
    if unknown:
        seed.note((), f"fields not carried over: {', '.join(unknown)}")
    return scenario


def _name(name: Any, seed: _File) -> str:
    """The seed's name when llmtt accepts it as one, else the file's."""
    if isinstance(name, str) and NAME_RE.match(name):
        return name
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", seed.path.stem).strip("-.") or "scenario"
    if name is not None:
        seed.note(("name",), f"{name!r} is not a usable scenario name: named {stem!r}")
    return stem


def _target(target: Any, seed: _File) -> Any:
    """The scenario's target: its own fields, a named target, or none (from_config)."""
    if target == "from_config":
        seed.note(("target",), "from_config: the scenario uses llmtt.toml's [target]")
        return None
    if not isinstance(target, dict):
        return target  # a named [targets.X] table in llmtt, or None
    kind = target.get("kind", "cli")
    if kind != "cli":
        seed.problem(("target", "kind"), f"a target of kind {kind!r} has no llmtt equivalent")
        return None
    own = {k: v for k, v in target.items() if k in _TARGET_FIELDS}
    dropped = sorted(set(target) - set(_TARGET_FIELDS) - {"kind"})
    if dropped:
        seed.note(("target",), f"fields not carried over: {', '.join(dropped)}")
    binary, check = own.get("binary"), own.get("health_check")
    if isinstance(binary, str) and isinstance(check, str):
        _health_check(binary, check, own, seed)
    return own


# A health check that asks for the tool's help as a subcommand, or for its version.
_HELP = re.compile(r"^\s*(\S+)\s+help\s*$")
_VERSION = re.compile(r"^\s*(\S+)\s+(?:--version|-V|version)\s*$")


def _health_check(binary: str, check: str, own: dict[str, Any], seed: _File) -> None:
    """Say what a `tool help` health check risks; take a `tool --version` one as the target's
    version command, so that its runs are keyed on its own version."""
    help_of = _HELP.match(check)
    if help_of:
        tool = help_of.group(1)
        seed.note(
            ("target", "health_check"),
            f"{check!r}: many tools exit 1 on `help` (a failed health "
            f"check means no run is carried out); if {tool} does, write `{tool} --version`, "
            f"or one that accepts exit 1: `{tool} help >/dev/null; [ $? -le 1 ]`",
        )
    version_of = _VERSION.match(check)
    if version_of and "/" not in binary and "version_command" not in own:
        if TargetSpec(binary=binary).same_tool(version_of.group(1)):
            own["version_command"] = check
            seed.note(
                ("target", "health_check"),
                f"{check!r} is also the target's version_command, so its runs are keyed on "
                f"{binary}'s version",
            )


def _fixture(folder: Any, seed: _File) -> Path | None:
    """The template folder, found as the seed finds it (`template_folder`); None with a
    problem when it is not there or cannot be used."""
    if folder is None:
        return None
    loc: Loc = ("template_folder",)
    if not isinstance(folder, str) or not folder.strip():
        seed.problem(loc, "must name a folder")
        return None
    here = seed.path.resolve().parent
    # The seed copies FIXTURES/templates/<template_folder>; ax-eval also takes a path from
    # the scenario file's folder or the project's.
    bases = [here / "templates", here, here.parent, here.parent.parent]
    found, looked = _find(folder, bases, "folder")
    if found is None:
        seed.problem(loc, f"no folder {folder!r}; looked in {', '.join(map(str, looked))}")
        return None
    if _usable(found, loc, "template folder", seed):
        why = fixture_problem(found)
        if why is None:
            return found
        seed.problem(loc, f"in {found}: {why}")
    return None


def _usable(path: Path, loc: Loc, what: str, seed: _File) -> bool:
    """Whether `path` lies where llmtt will read it (else a problem naming the fix)."""
    if not seed.project.outside(path):
        return True
    seed.problem(
        loc,
        f"the {what} {os.path.realpath(path)} lies outside the llmtt project "
        f"{seed.project.root}: import from inside the project (e.g. `llmtt init` in the seed "
        "project's folder), or set [paths] allow_outside = true in its llmtt.toml",
    )
    return False


def _find(rel: str, bases: list[Path], kind: str) -> tuple[Path | None, list[Path]]:
    """The first of `rel` under each base, then under the current folder, that is a `kind`
    ("folder" or "file"), and every place looked."""
    given = Path(os.path.expanduser(rel))
    places = [given] if given.is_absolute() else [b / given for b in [*bases, Path.cwd()]]
    looked = list(dict.fromkeys(Path(os.path.normpath(p)) for p in places))
    test = Path.is_dir if kind == "folder" else Path.is_file
    return next((p for p in looked if test(p)), None), looked


def _evaluation(
    data: dict[str, Any], fixture: Path | None, target: TargetSpec | None, seed: _File
) -> Any:
    """The evaluation section: the gates migrated, the judge's rubric found."""
    evaluation = data.get("evaluation")
    gates = data.get("gates")
    if gates is not None:
        # The older form: gates beside the evaluation, not in it.
        if isinstance(evaluation, dict) and "gates" in evaluation:
            seed.problem(("gates",), "gates are given twice (here and in evaluation.gates)")
            return evaluation
        evaluation = {**(evaluation if isinstance(evaluation, dict) else {}), "gates": gates}
        seed.note(("gates",), "the older form, beside evaluation: written as evaluation.gates")
        where: Loc = ("gates",)
    else:
        where = ("evaluation", "gates")
    if not isinstance(evaluation, dict):
        return evaluation
    evaluation = dict(evaluation)
    if isinstance(evaluation.get("gates"), list):
        binary = target.binary if target is not None else None
        evaluation["gates"] = _gates(evaluation["gates"], where, binary, seed)
    judge = evaluation.get("judge")
    if isinstance(judge, dict):
        evaluation["judge"] = _judge(judge, fixture, seed)
    return evaluation


def _gates(gates: list[Any], where: Loc, binary: str | None, seed: _File) -> list[Any]:
    """The gates, each retired domain gate migrated by the seed's table on the target's
    `binary` (reported)."""
    out = []
    for index, gate in enumerate(gates):
        if not isinstance(gate, dict):
            out.append(gate)
            continue
        made, note = migrate_gate(gate, binary)
        if made is None:
            seed.problem((*where, index, "type"), note or "cannot be carried over")
            continue
        if note:
            seed.note((*where, index), note)
        out.append(made)
    return out


def _judge(judge: dict[str, Any], fixture: Path | None, seed: _File) -> dict[str, Any]:
    """The judge settings, its rubric found as the seed finds it and named from the project's
    folder (as llmtt reads a rubric)."""
    judge = dict(judge)
    if "tool" in judge:
        seed.note(
            ("evaluation", "judge", "tool"),
            f"{judge.pop('tool')!r}: llmtt's judge is a model ([judge] model in llmtt.toml), "
            "not an agent CLI: left out",
        )
    config = seed.project.config
    if judge.get("enabled") is True and config is not None and not judge.get("model"):
        if not (config.judge.model or os.environ.get("LLMTT_JUDGE")):
            seed.problem(
                ("evaluation", "judge", "enabled"),
                "the judge is enabled and no judge model is set: set [judge] model in "
                f"{seed.project.root / CONFIG_FILE} (or LLMTT_JUDGE, or the seed's "
                "LLM_TOOL_TEST_JUDGE) first",
            )
    rubric = judge.get("rubric")
    if not isinstance(rubric, str):
        return judge
    loc: Loc = ("evaluation", "judge", "rubric")
    here = seed.path.resolve().parent
    # The seed reads FIXTURES/<rubric>; ax-eval also tries the workspace (the template).
    bases = [here, *([fixture] if fixture is not None else []), here.parent, here.parent.parent]
    found, looked = _find(rubric, bases, "file")
    if found is None:
        seed.problem(loc, f"no rubric file {rubric!r}; looked in {', '.join(map(str, looked))}")
        return judge
    if not _usable(found, loc, "rubric", seed):
        return judge
    try:
        load_rubric(found)
    except ConfigError as exc:
        seed.problem(loc, f"the rubric {found} is not one llmtt reads: {exc}")
        return judge
    judge["rubric"] = Path(os.path.relpath(found, seed.project.root)).as_posix()
    return judge


def _matrix(tools: Any, seed: _File) -> dict[str, list[str]]:
    """`tool_matrix` as llmtt's matrix: the agents llmtt has, and the union of their models."""
    if not isinstance(tools, list):
        if tools is not None:
            seed.note(("tool_matrix",), "not a list: not carried over")
        return {}
    known = known_agents(seed.project.config or Config())
    agents: list[str] = []
    models: list[str] = []
    per_tool: list[set[str]] = []
    for index, entry in enumerate(tools):
        loc: Loc = ("tool_matrix", index)
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str):
            seed.note(loc, f"{entry!r} has no tool: left out")
            continue
        if entry["tool"] not in known:
            agents_known = ", ".join(sorted(known))
            seed.note(
                loc,
                f"{entry['tool']!r} is not an llmtt agent ({agents_known}): left out, with its "
                "models",
            )
            continue
        agents.append(entry["tool"])
        own = [str(m) for m in entry.get("models") or []]
        per_tool.append(set(own))
        models.extend(m for m in own if m not in models)
    if len({frozenset(s) for s in per_tool}) > 1:
        seed.note(
            ("tool_matrix",),
            "gives its tools different models; llmtt runs every agent with every model: "
            f"{', '.join(agents)} x {', '.join(models)}",
        )
    out: dict[str, list[str]] = {}
    if agents:
        out["agents"] = agents
    if models:
        out["models"] = models
    return out


def _cost(cost: Any, scenario: dict[str, Any], seed: _File) -> None:
    if not isinstance(cost, dict):
        return
    if "max_usd" in cost:
        scenario["cost"] = {"max_usd": cost["max_usd"]}
    if cost.get("cache") is False:
        seed.note(
            ("cost", "cache"),
            "false has no equivalent: llmtt re-runs only what changed (`doit forget <run>` "
            "makes a run pending again)",
        )
    extra = sorted(set(cost) - {"max_usd", "cache"})
    if extra:
        seed.note(("cost",), f"fields not carried over: {', '.join(extra)}")


def check_files(files: list[Path]) -> None:
    """Every file given exists (else one clear error before anything is written)."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise LlmttError(f"no such scenario file: {', '.join(missing)}")
