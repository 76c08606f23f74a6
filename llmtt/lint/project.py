"""`llmtt lint` over a project: every target its scenarios use, every guidance file its
variants and fixtures give, every scenario's leakage. No model, no money, no network."""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.evaluation.shell.target_commands import TargetMatcher
from llmtt.execution import isolation
from llmtt.execution.agent_layer import GUIDANCE_FILES
from llmtt.execution.workspace import prepare, run_setup
from llmtt.lint import guidance, helptext
from llmtt.lint.findings import Finding, LintReport
from llmtt.lint.leakage import leaks
from llmtt.lint.surface import Bounds, Prober, Surface, read_surface
from llmtt.process.sandbox.bwrap import Sandbox, View, mounted
from llmtt.process.shell import run_shell
from llmtt.spec.config import TargetSpec
from llmtt.spec.project import Project
from llmtt.spec.scenario import LoadedScenario, ScenarioMatrix

# Each example runs under `set -e`; its ERR trap says which line failed (the script's line 1
# is this prelude, so the example's own line is LINENO - 1).
_PRELUDE = "set -eE; trap 'echo \"llmtt-lint: line $((LINENO - 1)) exited $?\" >&2' ERR\n"
_FAILED_LINE = "llmtt-lint: line "


@dataclass(frozen=True)
class Options:
    """What `llmtt lint` checks, and its bounds."""

    bounds: Bounds = Bounds()
    subcommands: tuple[str, ...] = ()  # only these (empty: all the help lists)
    scenarios: tuple[str, ...] = ()  # only these (empty: all)
    examples: bool = True
    max_guidance_tokens: int = 10000
    example_timeout_secs: float = 30.0


@dataclass
class _Guidance:
    """One guidance file and the scenarios that give it to an agent."""

    name: str  # where the agent finds it (AGENTS.md)
    source: Path
    shown: str  # the path the findings name
    variant: str | None
    scenarios: list[LoadedScenario] = field(default_factory=list)


def lint_project(project: Project, options: Options) -> LintReport:
    """Everything `llmtt lint` finds in `project`."""
    scenarios = _selected(project, options.scenarios)
    targets = _targets(project, scenarios)
    programs = [p for t in targets.values() for p in isolation.target_program(t.binary)]
    base = isolation.sandbox(project.root, project.results_dir, project.config, *programs)
    report = LintReport(confined=base is not None)
    scratch = Path(tempfile.mkdtemp(prefix="llmtt-lint-"))
    try:
        surfaces: dict[str, tuple[Surface, Prober, TargetSpec]] = {}
        for binary, target in targets.items():
            found = isolation.target_program(binary)
            if not found:
                raise LlmttError(
                    f"llmtt.toml: the target binary {binary!r} is not an executable on PATH "
                    "(nor a path to one); install it, or fix [target] binary"
                )
            program = str(found[0])
            prober = Prober(
                program,
                dict(target.env),
                base,
                scratch / f"t{len(surfaces)}",
                options.bounds.timeout_secs,
            )
            surface = read_surface(prober, binary, options.bounds, options.subcommands)
            surfaces[binary] = (surface, prober, target)
            report.targets.append(surface.record)
            report.findings += surface.findings
        files = _guidance_files(project, scenarios)
        for file in files:
            _lint_guidance(project, file, surfaces, base, scratch, options, report)
        texts = {f.source: _read(f.source) for f in files}
        for scenario in scenarios:
            theirs = {f.shown: texts[f.source] for f in files if scenario in f.scenarios}
            found_leaks = leaks(scenario, theirs, project.root)
            report.findings += found_leaks
            report.scenarios.append(
                {"name": scenario.name, "split": scenario.spec.split, "leaks": len(found_leaks)}
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report


def _selected(project: Project, names: tuple[str, ...]) -> list[LoadedScenario]:
    known = [s.name for s in project.scenarios]
    for name in names:
        if name not in known:
            raise LlmttError(f"--scenario {name}: no such scenario (scenarios: {', '.join(known)})")
    return [s for s in project.scenarios if not names or s.name in names]


def _targets(project: Project, scenarios: list[LoadedScenario]) -> dict[str, TargetSpec]:
    """Each target binary the scenarios use (with [target]'s own), once."""
    out: dict[str, TargetSpec] = {}
    for target in [project.config.target, *(project.target_for(s) for s in scenarios)]:
        if target.binary and target.binary not in out:
            out[target.binary] = target
    if not out:
        raise LlmttError(
            "llmtt.toml names no target: set [target] binary (the tool to lint) in llmtt.toml"
        )
    return out


def _variants_of(project: Project, scenario: LoadedScenario) -> list[str]:
    own = scenario.spec.matrix or ScenarioMatrix()
    return list(own.variants or project.config.matrix.variants)


def _guidance_files(project: Project, scenarios: list[LoadedScenario]) -> list[_Guidance]:
    """The variants' files and guidance, their skills' SKILL.md, and the fixtures' own
    AGENTS.md, CLAUDE.md and README.md, each with the scenarios that give it (a variant no
    scenario runs with: all of them)."""
    out: dict[Path, _Guidance] = {}
    for name, variant in project.config.variants.items():
        users = [s for s in scenarios if name in _variants_of(project, s)] or list(scenarios)
        laid = dict(variant.files)
        if variant.guidance is not None:
            laid["AGENTS.md"] = variant.guidance  # where most agents read it
        for folder in variant.skills:
            laid[f".agents/skills/{Path(folder).name}/SKILL.md"] = f"{folder}/SKILL.md"
        for dest, src in laid.items():
            source = project.root / src
            if source.suffix.lower() not in (".md", ".markdown", ".txt", ""):
                continue  # guidance is text; a variant may lay other files
            entry = out.setdefault(source, _Guidance(dest, source, src, name))
            entry.scenarios += [s for s in users if s not in entry.scenarios]
    for scenario in scenarios:
        fixture = scenario.fixture_dir
        if fixture is None:
            continue
        for name in GUIDANCE_FILES:
            source = fixture / name
            if source.is_file():
                shown = _relative(source, project.root)
                entry = out.setdefault(source, _Guidance(name, source, shown, None))
                if scenario not in entry.scenarios:
                    entry.scenarios.append(scenario)
    return list(out.values())


def _lint_guidance(
    project: Project,
    file: _Guidance,
    surfaces: dict[str, tuple[Surface, Prober, TargetSpec]],
    base: Sandbox | None,
    scratch: Path,
    options: Options,
    report: LintReport,
) -> None:
    text = _read(file.source)
    size = guidance.size_finding(text, file.shown, options.max_guidance_tokens)
    if size is not None:
        report.findings.append(size)
    binaries = {t.binary for t in (project.target_for(s) for s in file.scenarios) if t.binary}
    for binary in sorted(binaries or set(surfaces)):
        surface, prober, target = surfaces[binary]
        matcher = TargetMatcher.of(target)
        if matcher is None:
            continue
        report.findings += guidance.mention_findings(
            text,
            file.shown,
            matcher,
            functools.partial(_knows, surface, prober),
            functools.partial(_options, surface),
            bool(surface.helps),
        )
    examples: list[dict[str, Any]] = []
    runnable = [b for b in guidance.blocks(text) if b.runs and b.lines]
    if options.examples and runnable:
        for scenario in _distinct_fixtures(project, file.scenarios):
            found, ran = _run_examples(project, file, scenario, runnable, base, scratch, options)
            report.findings += found
            examples += ran
    report.guidance.append(
        {
            "file": file.shown,
            "as": file.name,
            "variant": file.variant,
            "tokens": helptext.approximate_tokens(text),
            "scenarios": [s.name for s in file.scenarios],
            "examples": examples,
        }
    )


def _knows(surface: Surface, prober: Prober, sub: str) -> bool:
    """Whether the tool has `sub`: listed by its help, or (git's less common commands) its
    `--help` works; what is learnt is kept."""
    if surface.knows(sub):
        return True
    probe = prober.run((sub, "--help"))
    if probe.exit_code != 0 or not probe.output.strip():
        probe = prober.run((sub, "-h"))
    if probe.exit_code == 0 and probe.output.strip():
        surface.helps[sub] = probe.output
        surface.options[sub] = helptext.options(probe.output)
        return True
    return False


def _options(surface: Surface, sub: str | None) -> set[str]:
    return surface.options.get(sub, set())


def _distinct_fixtures(project: Project, scenarios: list[LoadedScenario]) -> list[LoadedScenario]:
    """One scenario for each distinct starting state (fixture, setup, mounts, target)."""
    seen: set[object] = set()
    out = []
    for scenario in scenarios:
        spec = scenario.spec
        target = project.target_for(scenario)
        key = (
            scenario.fixture_dir,
            tuple(spec.setup.commands),
            tuple(sorted(spec.mounts.items())),
            target.binary,
            tuple(sorted(target.env.items())),
        )
        if key not in seen:
            seen.add(key)
            out.append(scenario)
    return out


def _run_examples(
    project: Project,
    file: _Guidance,
    scenario: LoadedScenario,
    runnable: list[guidance.Block],
    base: Sandbox | None,
    scratch: Path,
    options: Options,
) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Run the file's examples, in order, in a fresh copy of the scenario's fixture after its
    setup (as the agent would find it, the variant's files laid), confined and offline."""
    spec = scenario.spec
    laid = {}
    if file.variant is not None:
        laid = {d: project.root / s for d, s in project.config.variants[file.variant].files.items()}
    ws = prepare(
        scratch / f"e-{scenario.name}-{abs(hash(file.shown)):x}", scenario.fixture_dir, laid
    )
    view = View(cwd=ws.workspace, writable=(ws.workspace, ws.home), tmp=ws.tmp)
    if spec.mounts:
        if base is None:
            return [], []  # mounts need the sandbox; unconfined, the examples cannot see them
        view = mounted(view, ws.workspace, spec.mounts)
    env = ws.env(project.target_for(scenario).env)
    timeout = options.example_timeout_secs
    found: list[Finding] = []
    ran: list[dict[str, Any]] = []
    with isolation.confined(base, view) as confine:
        failed = run_setup(
            list(spec.setup.commands),
            cwd=ws.workspace,
            env=env,
            timeout_secs=timeout,
            confine=confine,
        )
        if failed is not None:
            found.append(
                Finding(
                    "example-setup",
                    f"the setup of scenario {scenario.name} failed offline "
                    f"({failed.describe()}: {failed.command}); its fixture ran no example",
                    file=file.shown,
                    scenario=scenario.name,
                )
            )
            return found, ran
        for block in runnable:
            done = run_shell(
                _PRELUDE + block.script(),
                cwd=ws.workspace,
                env=env,
                timeout_secs=timeout,
                combined=True,
                confine=confine,
            )
            line = _failed_line(done.stdout, block)
            ran.append(
                {
                    "line": block.start,
                    "scenario": scenario.name,
                    "exit_code": done.shell_exit_code,
                    "timed_out": done.timed_out,
                }
            )
            if done.ok:
                continue
            said = _said(done.stdout)
            found.append(
                Finding(
                    "example-fails",
                    f"the example at line {block.start} failed ({done.describe()}) in a fresh "
                    "copy of "
                    f"scenario {scenario.name}'s fixture"
                    + (f", at `{_command_at(block, line)}`" if line else "")
                    + (f": {said}" if said else ""),
                    file=file.shown,
                    line=line or block.start,
                    scenario=scenario.name,
                )
            )
    return found, ran


def _failed_line(output: str, block: guidance.Block) -> int | None:
    """The file's line of the command the ERR trap reported, or None."""
    for text in reversed(output.splitlines()):
        if text.startswith(_FAILED_LINE):
            number = text.removeprefix(_FAILED_LINE).split(" ", 1)[0]
            if number.isdigit() and 1 <= int(number) <= len(block.lines):
                return block.lines[int(number) - 1][0]
    return None


def _command_at(block: guidance.Block, line: int) -> str:
    return next((t.strip() for n, t in block.lines if n == line), "")


def _said(output: str, limit: int = 160) -> str:
    """The last line the example printed before llmtt's own, cut to `limit`."""
    lines = [t for t in output.strip().splitlines() if not t.startswith(_FAILED_LINE) and t.strip()]
    text = lines[-1].strip() if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LlmttError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
