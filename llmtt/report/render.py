"""Rendering: a run's `evaluation.md`, and the aggregate `report.md` / `report.json`."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.plan.keys import TRIAGE_FILE
from llmtt.plan.runs import Run
from llmtt.results.baseline import group_label
from llmtt.results.comparison import shown_end
from llmtt.spec.project import Project
from llmtt.util.atomic import read_json, read_jsonl, write_text
from llmtt.util.text import printable

PACKAGE_TEMPLATES = Path(__file__).parents[1] / "templates"


def _environment(project: Project) -> Any:
    return _environment_for(project.templates_dir, compiled_dir(project.results_dir, "text"))


@functools.cache
def compiled_dir(results_dir: Path, kind: str) -> Path:
    """Where the templates of one environment are kept compiled: under the results folder,
    apart per environment (its options shape the code) and per llmtt (its filters)."""
    from llmtt.report.cache import code_id

    digest = hashlib.sha256(f"{kind} {code_id()}".encode()).hexdigest()[:16]
    return results_dir / ".llmtt-cache" / "templates" / f"{kind}-{digest}"


@functools.cache
def bytecode_cache(directory: Path) -> Any:
    """jinja2's bytecode cache in `directory`, keyed by each template's name and source: a
    template compiles once, not once per process (each took ~20 ms; loading it, ~0.5 ms).
    A cache that cannot be written (a read-only results folder, a full disk) only costs the
    compile."""
    import jinja2

    class Kept(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except OSError:
                pass

        def dump_bytecode(self, bucket: Any) -> None:
            try:
                os.makedirs(self.directory, exist_ok=True)
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return Kept(str(directory))


@functools.cache
def _environment_for(templates_dir: Path, compiled: Path) -> Any:
    """One environment per templates folder and process: it compiles each template once (and
    again only when the file changes), where a new one per run recompiled it every time; and
    keeps it compiled in `compiled` for the next process."""
    import jinja2

    loader = jinja2.ChoiceLoader(
        [jinja2.FileSystemLoader(templates_dir), jinja2.FileSystemLoader(PACKAGE_TEMPLATES)]
    )
    env = jinja2.Environment(
        loader=loader,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        bytecode_cache=bytecode_cache(compiled),
    )
    add_filters(env)
    env.filters["cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    return env


def add_filters(env: Any) -> None:
    """The words every template uses for values that are not there (the same in every report):
    `n/a` a value that does not apply (a rate over no command, no judge), `unknown` one that
    exists but nobody knows (a cost with no known price, an exit code never reported), `no
    model` / `no variant` a run axis left out by design."""
    env.filters["num"] = num
    env.filters["usd"] = _usd
    env.filters["exit"] = exit_label
    env.filters["model"] = lambda v: v or "no model"
    env.filters["variant"] = lambda v: v or "no variant"
    env.filters["group"] = group_label
    env.filters["signed"] = signed
    env.filters["end"] = shown_end
    env.filters["verdict"] = lambda v: VERDICT_WORDS.get(v, v)


VERDICT_WORDS = {
    "better": "better",
    "worse": "worse",
    "no_difference": "no difference",
    "cant_tell": "can't tell",
}


def signed(value: Any, digits: int = 3) -> str:
    """A difference, with its sign (`n/a` when there is none)."""
    if value is None:
        return "n/a"
    shown = round(float(value), digits)
    return f"{shown:+g}" if shown else "0"


def _usd(value: Any, digits: int = 4) -> str:
    """A cost in USD; null is a cost nobody knows (no known price), never zero."""
    return "unknown" if value is None else num(value, digits)


def num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{round(value, digits):g}"
    return str(value)


def render(project: Project, name: str, **context: Any) -> str:
    """Render one template; a broken template is the user's error, named with file and line."""
    import jinja2

    try:
        return str(_environment(project).get_template(name).render(**context))
    except jinja2.TemplateSyntaxError as exc:
        where = f"{exc.filename or name}:{exc.lineno}"
        raise LlmttError(f"{where}: template syntax error: {exc.message}") from None
    except jinja2.TemplateError as exc:
        own = project.templates_dir / name
        source = own if own.is_file() else PACKAGE_TEMPLATES / name
        raise LlmttError(f"{source}: template error: {exc}") from None


def render_evaluation(project: Project, run: Run) -> tuple[str, str]:
    """Write the run's `evaluation.md` from its artifacts; return its outcome and reason (as
    the console may show it)."""
    info = read_json(run.dir / "run.json")
    metrics = read_json(run.dir / "metrics.json")
    gates = read_json(run.dir / "gates.json")["gates"]
    commands = paired_calls(read_jsonl(run.dir / "events.jsonl"))
    judge_path = run.dir / "judge.json"
    judge = read_json(judge_path) if run.judge is not None and judge_path.exists() else None
    triage = triage_answer(run, metrics.get("triage"))
    text = render(
        project,
        "evaluation.md.j2",
        run=info,
        metrics=metrics,
        gates=gates,
        commands=commands,
        scenario=run.scenario.spec,
        scenario_name=run.scenario.name,
        target=run.target,
        judge=judge,
        # The triage model's answer (the triage layer), when it gave one for this run.
        triage_answer=triage,
    )
    redact = project.redactor()
    write_text(run.dir / "evaluation.md", printable(redact(text)))
    return str(metrics["outcome"]), printable(redact(str(metrics["outcome_reason"])))


def triage_answer(run: Run, rule: dict[str, Any] | None) -> dict[str, Any] | None:
    """The triage model's answer on this failure of the run (triage.json; `line`, or
    `gave_up` when it gave none in every attempt allowed), or None: no triage layer, no answer
    yet, or one about an earlier failure (its rule-based line differs)."""
    path = run.dir / TRIAGE_FILE
    if run.triage is None or not rule or not path.exists():
        return None
    answer: dict[str, Any] = read_json(path)
    answered = answer.get("line") or answer.get("gave_up")
    if not answered or answer.get("rule_line") != rule.get("line"):
        return None
    return answer


def paired_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool call's command with its result's exit code (null: no result, or unknown) and
    output ("" without a result)."""
    calls: dict[str, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    for event in events:
        if event["event"] == "tool_call":
            entry = {"command": event["command"], "exit_code": None, "output": ""}
            calls[str(event.get("id"))] = entry
            order.append(entry)
        elif event["event"] == "tool_result" and str(event.get("id")) in calls:
            call = calls[str(event.get("id"))]
            call["exit_code"] = event.get("exit_code")
            call["output"] = event.get("output") or ""
    return order


def exit_label(code: Any) -> str:
    """An exit code as the reports word it: null is a code nobody knows, never 0."""
    return "unknown" if code is None else str(code)
