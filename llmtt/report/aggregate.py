"""The reports of a plan (report.md, report.json, report.html, junit.xml): every run's row and
html panel, the summary, groups and breakdowns, the history; rendered through `render`."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtt.errors import LlmttError
from llmtt.evaluation.outcome import as_expected, verdict
from llmtt.evaluation.paid_triage import spent
from llmtt.execution.asciicast import CAST_FILE, read_cast
from llmtt.plan.keys import ATTEMPTS, TRIAGE_FILE
from llmtt.plan.runs import Plan, Run
from llmtt.providers import SCRIPTED
from llmtt.redaction import Redactor
from llmtt.report.charts import history_chart
from llmtt.report.failures import failure_rollup
from llmtt.report.judge_agreement import judge_agreement
from llmtt.report.junit import junit
from llmtt.report.panels import write_panels
from llmtt.report.render import (
    PACKAGE_TEMPLATES,
    add_filters,
    bytecode_cache,
    compiled_dir,
    exit_label,
    num,
    render,
    triage_answer,
)
from llmtt.report.subcommands import by_subcommand, read_lint
from llmtt.report.triggers import trigger_rates
from llmtt.results.baseline import compared, regressions
from llmtt.results.comparison import compare_runs, designs
from llmtt.results.store import sync_results_db
from llmtt.results.summary import comparisons, repeats
from llmtt.results.trends import history
from llmtt.spec.config import VariantSpec
from llmtt.spec.project import Project
from llmtt.util.atomic import read_json, read_jsonl, write_json, write_text
from llmtt.util.hashing import hash_file
from llmtt.util.text import printable

if TYPE_CHECKING:
    from llmtt.report.cache import Made

REPORT_FORMAT = 1


# What report.html reads of a transcript's end, to show its last 4,000 characters once
# terminal sequences are gone.
TRANSCRIPT_TAIL_BYTES = 65536
# The end of a run's session recording that its panel plays (session.cast keeps it all): a
# panel is read only when its run is opened (report-runs/, `llmtt.report.panels`), yet 10,000
# of them are up to 80 MB on disk.
CAST_TAIL_BYTES = 8192
# Runs report.html lists in itself, and on each page of its list: the others are listed by its
# script, a page at a time, from compact data.
FIRST_RUNS = 100
# Runs whose recordings `run_panels` (every panel in one string, for a report.html.j2 of a
# project's own written when the page held them) plays; past it, each panel names its run's
# session.cast instead, so that such a page stays as large as it was before report-runs/.
EVERY_CAST_UP_TO = 1000


def report_data(
    rows: list[dict[str, Any]],
    selection: str,
    generated_at: str,
    comparison: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one data model every report renders: counts, the comparison with the baseline
    (`llmtt.results.comparison`; None without variants to compare), groups, repeats, model
    comparisons, runs."""
    data = {
        "format": REPORT_FORMAT,
        "generated_at": generated_at,
        "selection": selection,
        "summary": _summary(rows),
        "comparison": comparison,
        "groups": _groups(rows),
        "scenarios": _by_scenario(rows),
        "categories": _by_tag(rows),
        "repeats": repeats(rows),
        "comparisons": comparisons(rows),
        "runs": rows,
    }
    if any(r.get("split") == "holdout" for r in rows):
        # Guidance tuned on some scenarios is judged on the others: each part on its own.
        data["splits"] = {
            split: _summary([r for r in rows if r.get("split", "tune") == split])
            for split in ("tune", "holdout")
        }
    return data


def aggregate(plan: Plan, adaptive: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write report.json, report.md, report.html (its runs' panels in report-runs/) and
    junit.xml over every run of the plan; return their data (redacted, like every file it goes
    into). `adaptive`: under repeats=auto, its design (the `looks` the comparison's intervals
    pay for) and where each scenario stands."""
    from llmtt.report.cache import report_runs

    project = plan.project
    sync_results_db(project.results_dir / "results.jsonl")  # after a kill between the two
    redact = project.redactor()
    env = _html_environment(project)
    panel = env.get_template("report-run.html.j2")
    made = report_runs(
        project.results_dir,
        plan.runs,
        redact,
        lambda run: _row_and_panel(run, redact),
        lambda row, details: str(panel.render(r=row, d=details)),
        _template_id(project, "report-run.html.j2"),
    )
    rows = [m.row for m in made]
    # By the run ids the page shows, which are redacted like the rest of a row: a secret that
    # shares characters with a scenario's or variant's name never reaches report-runs/ by its
    # key, and the page finds the panel of the id it shows.
    details = _Panels({m.row["run_id"]: m.panel for m in made})
    # Each run's panel goes to report-runs/, read by report.html when the run is opened.
    files = write_panels(
        project.results_dir,
        [(m.row["run_id"], m.html) for m in made],
        lambda html: printable(redact(html)),
    )
    run_panels = _Joined(made, lambda row, data: str(panel.render(r=row, d=data)))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    data: dict[str, Any] = report_data(
        rows, plan.selection.describe(), now, _comparison(plan, rows, adaptive)
    )
    used = by_subcommand(
        rows,
        {r.run_id: Path(r.target.binary or "").name for r in plan.runs},
        read_lint(project.results_dir),
    )
    if used:
        data["subcommands"] = used
    triggers = trigger_rates(rows)
    if triggers:
        data["skill_triggers"] = triggers
    failures = failure_rollup(rows)
    if failures is not None:
        data["failures"] = failures
    judged = any(run.judge is not None for run in plan.runs)
    agreement = judge_agreement(rows, project.config.judge.when if judged else None)
    if agreement is not None:
        data["judge_agreement"] = agreement
    baseline = project.root / project.config.paths.baseline
    blessed = read_json(baseline) if baseline.exists() else None
    if blessed is not None:
        data["baseline"] = str(baseline.relative_to(project.root))
        data["regressions"] = regressions(rows, blessed, project.config.regressions)
        data["baseline_compared"] = compared(rows, blessed)
    # The rows are redacted already, and what is made of them holds the selection and the
    # baseline besides.
    data = {k: v if k == "runs" else redact.value(v) for k, v in data.items()}
    results = project.results_dir
    trend = history(results / "results.db", blessed)
    trend["chart"] = history_chart(trend["points"], trend["lines"])
    trend = redact.value(trend)
    write_json(results / "report.json", data, compact=True)  # `data` is redacted above
    # What runs printed reaches these raw but for its terminal sequences and control
    # characters, which would act on a terminal showing them and make junit.xml no XML.
    write_text(results / "junit.xml", printable(redact(junit(data["runs"]))))
    html = _html(project, data, details, run_panels, trend, files)
    write_text(results / "report.html", printable(redact(html)))
    write_text(results / "report.md", printable(redact(render(project, "report.md.j2", **data))))
    return data


def _comparison(
    plan: Plan, rows: list[dict[str, Any]], adaptive: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The comparison with the baseline, each treatment with the diff of its guidance files
    against the baseline's, and under repeats=auto where each scenario stands."""
    found, notes = designs(plan)
    looks = adaptive["looks"] if adaptive else 1
    comparison = compare_runs(rows, found, looks, notes)
    if comparison is None:
        return None
    comparison["adaptive"] = adaptive
    variants = plan.project.config.variants
    for entry in comparison["treatments"]:
        if not entry["against_control"]:
            entry["guidance_diff"] = guidance_diff(
                plan.project.root, variants, entry["baseline"], entry["treatment"]
            )
    return comparison


GUIDANCE_DIFF_LINES = 400  # of each file's diff in the reports


def guidance_diff(
    root: Path, variants: Mapping[str, VariantSpec], baseline: str, treatment: str
) -> list[dict[str, Any]]:
    """Per workspace path either variant lays, the unified diff of the baseline's file against
    the treatment's ("none" lays none: an empty side); files that are the same are left out."""
    import difflib

    def files(name: str) -> dict[str, str]:
        spec = variants.get(name)
        return dict(spec.files) if spec is not None else {}

    mine, theirs = files(baseline), files(treatment)
    out: list[dict[str, Any]] = []
    for name, spec in ((baseline, mine), (treatment, theirs)):
        if name not in variants:  # "none" lays nothing: what the agent reads is the fixture's
            other = theirs if spec is mine else mine
            return [
                {
                    "path": dest,
                    "diff": None,
                    "note": f"{name} lays no file: the fixture's own {dest}, if it has one, "
                    "is what the agent reads",
                }
                for dest in sorted(other)
            ]
    for dest in sorted(set(mine) | set(theirs)):
        old = _text_of(root, mine.get(dest))
        new = _text_of(root, theirs.get(dest))
        if old == new:
            continue
        lines = list(
            difflib.unified_diff(
                old.splitlines(),
                new.splitlines(),
                f"{baseline}: {mine.get(dest, '(none)')}",
                f"{treatment}: {theirs.get(dest, '(none)')}",
                lineterm="",
            )
        )
        cut = len(lines) - GUIDANCE_DIFF_LINES
        shown = lines[:GUIDANCE_DIFF_LINES] + ([f"... {cut} more lines"] if cut > 0 else [])
        out.append({"path": dest, "diff": "\n".join(shown), "note": None})
    return out


def _text_of(root: Path, source: str | None) -> str:
    if source is None:
        return ""
    try:
        return (root / source).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot be read: {exc.strerror or exc})"


def _html(
    project: Project,
    data: dict[str, Any],
    details: Mapping[str, Any],
    run_panels: _Joined,
    trend: dict[str, Any],
    files: dict[str, Any],
) -> str:
    """report.html: inline CSS, SVG charts and a small script; the runs' panels are in the
    files of report-runs/ beside it (`files`: which, and what each holds), read when a run is
    opened. `run_panels`: every panel's HTML at once, for a template of the project's own
    written when report.html held them."""
    import jinja2

    from llmtt.report.charts import cost_vs_pass, pass_rate_bars

    env = _html_environment(project)
    charts = {"pass_rate": pass_rate_bars(data["groups"]), "cost": cost_vs_pass(data["groups"])}
    lines = [_run_line(r) for r in data["runs"]]
    try:
        return str(
            env.get_template("report.html.j2").render(
                **data,
                details=details,
                run_panels=run_panels,
                run_lines=lines[:FIRST_RUNS],
                run_data=_run_data(lines, files),
                charts=charts,
                history=trend,
            )
        )
    except jinja2.TemplateError as exc:
        raise LlmttError(f"report.html.j2: template error: {exc}") from None


def _html_environment(project: Project) -> Any:
    return _html_environment_for(project.templates_dir, compiled_dir(project.results_dir, "html"))


@functools.cache
def _html_environment_for(templates_dir: Path, compiled: Path) -> Any:
    """The environment of report.html and its runs' panels (escaping what it shows)."""
    import jinja2

    loader = jinja2.ChoiceLoader(
        [jinja2.FileSystemLoader(templates_dir), jinja2.FileSystemLoader(PACKAGE_TEMPLATES)]
    )
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=bytecode_cache(compiled),
    )
    add_filters(env)
    return env


def _template_id(project: Project, name: str) -> str:
    """What tells the template of that name that renders (the project's own, else llmtt's) from
    another: its content's hash."""
    own = project.templates_dir / name
    return hash_file(own if own.is_file() else PACKAGE_TEMPLATES / name)


def _run_line(row: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """A run's line in report.html's list of runs: its id, its verdict (as the panel's summary
    words it), the class that colours the verdict, its outcome's reason."""
    outcome = row["outcome"]
    if outcome == row.get("expect", "pass"):
        shown = "expected" if outcome == "fail" else "pass"
    else:
        shown = "fail" if outcome == "pass" else outcome
    verdict = str(row.get("verdict", outcome)).upper()
    # printable: the list's script shows it as text, past the page's own last pass over it
    return row["run_id"], verdict, shown, printable(str(row["outcome_reason"]))


def _run_data(lines: list[tuple[str, str, str, str]], files: dict[str, Any]) -> dict[str, Any]:
    """What report.html's script lists the runs from and reads their panels by: each run as
    [id, verdict, class, reason] (a reason shared by many runs is written once, in `reasons`,
    and named by its index), and the panels' files (`panels.write_panels`)."""
    reasons: dict[str, int] = {}
    rows = [[i, v, c, reasons.setdefault(r, len(reasons))] for i, v, c, r in lines]
    return {"rows": rows, "reasons": list(reasons), "page": FIRST_RUNS, **files}


class _Joined:
    """Every run's panel HTML, joined only if a template shows it (`{{ run_panels }}` in a
    report.html.j2 of a project's own, written when report.html held the panels). Past
    EVERY_CAST_UP_TO runs the panels are rendered again without their recordings, as they were
    then: 10,000 recordings in one page are up to 80 MB."""

    def __init__(self, made: list[Made], render: Callable[[Any, Any], str]) -> None:
        self._made = made
        self._render = render

    def __html__(self) -> str:
        if len(self._made) <= EVERY_CAST_UP_TO:
            return "".join(m.html for m in self._made)
        return "".join(self._render(m.row, _named_cast(json.loads(m.panel))) for m in self._made)

    def __str__(self) -> str:
        return self.__html__()


def _named_cast(details: dict[str, Any]) -> dict[str, Any]:
    """A panel's data with its run's recording named (`cast_file`) instead of played."""
    if details.pop("cast", None):
        details["cast_file"] = True
    return details


class _Panels(Mapping[str, Any]):
    """Each run's panel by run id, read from its JSON when a template asks for it: the default
    report.html has the panels rendered already (in report-runs/), so 10,000 are not decoded for
    nothing (a template of the project's own may still read `details`)."""

    def __init__(self, panels: dict[str, str]) -> None:
        self._panels = panels

    def __getitem__(self, run_id: str) -> Any:
        return json.loads(self._panels[run_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._panels)

    def __len__(self) -> int:
        return len(self._panels)


# The interaction metrics a run's panel shows, by their metrics.json names (DESIGN.md).
PANEL_METRICS = (
    "turns",
    "tool_calls",
    "tool_calls_error",
    "total_commands",
    "unique_commands",
    "error_count",
    "error_rate",
    "unknown_exit_count",  # beside the rate, which is over the known exits
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "duration_secs",
)


def _row_and_panel(run: Run, redact: Redactor) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's row (its result.json, or what is known of a run not evaluated, read against its
    scenario's `expect`) and its panel; neither redacted yet (but for what is cut of a failed
    call's output, which `redact` masks before it is cut)."""
    row = _expectation(run, _row(run))
    return row, _details(run, redact)


def _details(run: Run, redact: Redactor) -> dict[str, Any]:
    """A run's panel: interaction metrics, gate results, failed tool calls with what they said
    (those of the target first), the event timeline (failed calls marked), the transcript's
    end."""
    from llmtt.report.calls import failed_calls
    from llmtt.util.text import strip_ansi

    out: dict[str, Any] = {}
    gates = run.dir / "gates.json"
    if gates.exists():
        out["gates"] = read_json(gates)["gates"]
    metrics_path = run.dir / "metrics.json"
    metrics = read_json(metrics_path) if metrics_path.exists() else {}
    if "total_commands" in metrics:  # an evaluated run (an error outcome has no such metrics)
        out["metrics"] = {name: metrics.get(name) for name in PANEL_METRICS}
    evaluated = metrics.get("evaluators")
    if evaluated:
        out["evaluators"] = {k: evaluated[k] for k in ("overall_score", "results", "errors")}
    events = run.dir / "events.jsonl"
    if events.exists():
        listed = read_jsonl(events)
        out["timeline"] = _timeline(listed[:400])
        out["failed_calls"] = failed_calls(listed, run.target, redact)
    transcript = run.dir / "transcript.raw.txt"
    if transcript.exists():
        with open(transcript, "rb") as handle:  # its end only: a transcript may be 100 MB
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - TRANSCRIPT_TAIL_BYTES))
            text = strip_ansi(handle.read().decode("utf-8", errors="replace"))
        if len(text) > 4000:
            # From a line's start: a line cut in the middle may show the end of a key whose
            # shape, at its start, was what gave it away.
            text = text[-4000:].partition("\n")[2] or text[-4000:]
        out["transcript"] = text
    cast = read_cast(run.dir / CAST_FILE, CAST_TAIL_BYTES)
    if cast is not None and cast["events"]:
        out["cast"] = cast  # its text is redacted with the rest of the panel
    return out


def _timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as lines, each with its kind; a tool call whose result exited non-zero and
    that result are both of kind `failed`."""
    lines: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event["event"]
        if kind == "tool_call":
            line = {"kind": "call", "text": f"$ {event['command']}"}
            calls[str(event.get("id"))] = line
            lines.append(line)
        elif kind == "tool_result":
            code = event.get("exit_code")
            failed = code not in (0, None)
            lines.append(
                {"kind": "failed" if failed else "result", "text": f"  -> exit {exit_label(code)}"}
            )
            if failed and str(event.get("id")) in calls:
                calls[str(event.get("id"))]["kind"] = "failed"
        elif kind == "message":
            lines.append({"kind": "agent", "text": f"agent: {str(event.get('text', ''))[:300]}"})
        elif kind == "complete":
            code, timed_out = exit_label(event.get("exit_code")), num(event.get("timed_out"))
            said = f"exit {code}, timed out {timed_out}"
            lines.append({"kind": "end", "text": f"(ended: {said})"})
    return lines


def _row(run: Run) -> dict[str, Any]:
    path = run.dir / "result.json"
    lost = _lost_attempts(run)
    if not path.exists():
        return {
            **run.identity(),
            "outcome": "missing",
            "outcome_reason": "not evaluated",
            "gates_passed": 0,
            "gates_total": 0,
            "metrics": {},
            "cost_usd": None,
            "duration_secs": None,
            **lost,
        }
    record: dict[str, Any] = read_json(path)
    record.update(lost)
    answer = triage_answer(run, record.get("triage"))
    if answer is not None:  # the triage model's line, beside the rule-based fields
        record["triage"] = {
            **record["triage"],
            "model_line": answer.get("line"),
            "model": answer.get("model"),
            "model_gave_up": answer.get("gave_up"),
        }
    if run.triage is not None and (run.dir / TRIAGE_FILE).exists():
        # Every triage answer and attempt of the run, paid, as the judge's cost is counted.
        record["triage_cost_usd"] = spent(run.dir / TRIAGE_FILE)
    return record


def _lost_attempts(run: Run) -> dict[str, Any]:
    """What the run's agent attempts under its current key that could not be carried out
    spent (a run stopped for the budget while running, a provider that failed mid-run, one lost
    with its worker process or Ray node): paid, and in no result, so counted apart
    (`attempts_cost_usd`, with `attempts_cost_lower_bound` when one of them, or a damaged line
    of the record, has no known cost); {} when none spent anything known."""
    if run.model in (None, SCRIPTED):
        return {}  # no model, or the scripted one: nothing to pay
    try:
        text = (run.dir / ATTEMPTS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    lost, damaged = [], False
    for line in text.splitlines():
        try:
            attempt = json.loads(line) if line.strip() else None
        except ValueError:
            damaged = True  # a line cut short by a kill: what it paid is not known
            continue
        if isinstance(attempt, dict) and attempt.get("key") == run.agent_key:
            if attempt.get("status") == "error":
                lost.append(attempt)
    # An attempt that made no request paid nothing; one whose requests are not known may have,
    # as may one lost with its worker or node (its record may lack what it spent last).
    costs = [
        a.get("cost_usd")
        for a in lost
        if a.get("requests") != 0 or a.get("cost_usd") or a.get("lost")
    ]
    known = [float(c) for c in costs if isinstance(c, int | float) and not isinstance(c, bool)]
    if not costs and not damaged:
        return {}
    return {
        "attempts_cost_usd": round(sum(known), 6),
        "attempts_cost_lower_bound": damaged
        or len(known) < len(costs)
        or any(bool(a.get("cost_lower_bound")) for a in lost),
    }


def _expectation(run: Run, row: dict[str, Any]) -> dict[str, Any]:
    """The row with the scenario's current `expect` and the outcome worded against it; the
    outcome itself stays what happened (result.json and results.jsonl never hold these)."""
    row["expect"] = run.scenario.spec.expect
    row["split"] = run.scenario.spec.split
    row["verdict"] = verdict(row)
    return row


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    # One pass over the rows (a report of 10,000 runs sums them for every group, scenario and
    # tag).
    counts: dict[str, int] = defaultdict(int)
    costs: list[float] = []
    layer_costs: list[float] = []
    gates_passed: float = 0
    gates_total: float = 0
    names = ("tool_calls_ok", "tool_calls_error", "turns", "input_tokens", "output_tokens")
    totals = dict.fromkeys(names, 0)
    done = failed_as_expected = passed_unexpectedly = unconfined = 0
    lower_bound = False
    duration: float = 0
    for r in rows:
        outcome = r["outcome"]
        counts[outcome] += 1
        duration += r["duration_secs"] or 0
        if r.get("cost_usd") is not None:
            costs.append(r["cost_usd"])
            lower_bound = lower_bound or bool((r.get("metrics") or {}).get("cost_lower_bound"))
        judge = r.get("judge")
        if judge and judge.get("cost_usd"):
            layer_costs.append(judge["cost_usd"])
        if r.get("triage_cost_usd"):
            layer_costs.append(r["triage_cost_usd"])
        if r.get("attempts_cost_usd") is not None:  # attempts paid for and lost
            layer_costs.append(r["attempts_cost_usd"])
            lower_bound = lower_bound or bool(r.get("attempts_cost_lower_bound"))
        if outcome not in ("pass", "fail"):
            continue
        done += 1
        unconfined += r.get("isolation", "none") != "bwrap"
        # Weighted (bashkit-eval's overall rate); records written before weights count each
        # gate 1.
        gates_passed += r.get("gates_score", r.get("gates_passed")) or 0
        gates_total += r.get("gates_max", r.get("gates_total")) or 0
        metrics = r.get("metrics") or {}
        for name in names:
            totals[name] += int(metrics.get(name) or 0)
        if r.get("expect") == "fail":
            if as_expected(r):
                failed_as_expected += 1
            else:
                passed_unexpectedly += 1
    evaluated = counts["pass"] + counts["fail"]
    costs += layer_costs
    calls_ok, calls_error = totals["tool_calls_ok"], totals["tool_calls_error"]
    turns = totals["turns"]
    return {
        "runs": len(rows),
        "passed": counts["pass"],
        "failed": counts["fail"],
        # of the failed and the passed: negative controls (`expect: fail`) that did as expected
        "failed_as_expected": failed_as_expected,
        "passed_unexpectedly": passed_unexpectedly,
        "errors": counts["error"],
        "missing": counts["missing"],
        # outcomes the agent could have reached (README: "What a run can reach")
        "unconfined": unconfined,
        "pass_rate": round(counts["pass"] / evaluated, 4) if evaluated else None,
        # bashkit-eval's partial rate: the share of all gates that passed, over every run
        "gate_rate": round(gates_passed / gates_total, 4) if gates_total else None,
        "tool_calls_ok": calls_ok,
        "tool_calls_error": calls_error,
        "tool_call_success_rate": round(calls_ok / (calls_ok + calls_error), 4)
        if calls_ok + calls_error
        else None,
        "turns": turns,
        "mean_turns": round(turns / done, 2) if done else None,
        "input_tokens": totals["input_tokens"],
        "output_tokens": totals["output_tokens"],
        "cost_usd": round(sum(costs), 6) if costs else None,
        # some run's provider cut an answer before its usage: the cost is at least this
        "cost_lower_bound": lower_bound,
        "duration_secs": round(duration, 3),
        **_per_task(rows),
    }


def _per_task(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """bashkit-eval's per-task figures of its run summary, over the evaluated runs (its tasks;
    docs/metrics.md): tool calls and wall-clock duration per task, and the share of tasks whose
    agent stopped on its own (of those where that is known)."""
    done = [r for r in rows if r["outcome"] in ("pass", "fail")]
    calls = sum(int((r.get("metrics") or {}).get("tool_calls") or 0) for r in done)
    # The agent's own wall-clock time (its `complete` event), as bashkit-eval times its loop.
    timed: list[float] = [
        float(m["duration_secs"])
        for m in ((r.get("metrics") or {}) for r in done)
        if m.get("duration_secs") is not None
    ]
    stops = [(r.get("metrics") or {}).get("natural_stop") for r in done]
    known = [s for s in stops if s is not None]
    return {
        "avg_tool_calls_per_task": round(calls / len(done), 4) if done else None,
        "avg_duration_ms": round(sum(timed) * 1000 / len(timed), 1) if timed else None,
        "natural_stops": sum(1 for s in known if s),
        "natural_stop_rate": round(sum(1 for s in known if s) / len(known), 4) if known else None,
        # runs whose agent did not say why it stopped: counted in neither share
        "natural_stop_unknown": len(stops) - len(known),
    }


def _groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # No model / no variant is null in the data and worded by the templates ("no variant").
    grouped: dict[tuple[str, str | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["agent"], row["model"] or None, row["variant"] or None)].append(row)
    out = []
    for (agent, model, variant), members in sorted(
        grouped.items(), key=lambda item: tuple(part or "" for part in item[0])
    ):
        summary = _summary(members)
        metrics = [m["metrics"] for m in members if m.get("metrics")]
        out.append(
            {
                "agent": agent,
                "model": model,
                "variant": variant,
                **summary,
                "mean_error_rate": _mean(m.get("error_rate") for m in metrics),
                "mean_first_try_success_rate": _mean(
                    m.get("first_try_success_rate") for m in metrics
                ),
                # Beside the rates, which are over the known exits (docs/metrics.md).
                "unknown_exit_count": sum(m.get("unknown_exit_count") or 0 for m in metrics),
                "total_commands": sum(m.get("total_commands", 0) for m in metrics),
                "help_invocations": sum(m.get("help_invocations", 0) for m in metrics),
            }
        )
    return out


def _by_scenario(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["scenario"]].append(row)
    return [{"scenario": name, **_summary(members)} for name, members in sorted(grouped.items())]


def _by_tag(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        for tag in row.get("tags") or ["(untagged)"]:
            grouped[tag].append(row)
    return [{"tag": tag, **_summary(members)} for tag, members in sorted(grouped.items())]


def _mean(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None
