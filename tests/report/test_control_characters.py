"""What runs print never reaches a terminal, a report or junit.xml raw: terminal sequences (a
window title, a cleared screen, colours), NUL and C1 control characters from a solution's
commands, a gate's output and a failing setup command are removed or shown as escapes, and
junit.xml stays XML. Every layer runs in this process, as doit's actions would run it."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace
from xml.etree import ElementTree

import pytest
from conftest import Project, run_panels

from llmtt.commands.main import main as llmtt_main
from llmtt.evaluation.evaluate import evaluate_run
from llmtt.execution.agent_layer import execute_run
from llmtt.plan.runs import build_plan
from llmtt.report.aggregate import aggregate
from llmtt.report.render import render_evaluation
from llmtt.results.store import ResultsStore
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection
from llmtt.taskgraph.actions import _outcome_line
from llmtt.taskgraph.progress import ProgressReporter
from llmtt.util.atomic import read_jsonl

# Printed by printf: a window title, a cleared screen, a colour, a NUL, and the one-byte CSI
# (as a character, U+009B, and as a byte that is no UTF-8).
HOSTILE = r"\033]0;pwned\007\033[2J\033[31mred\000nul\302\233csi\233byte\033[0m"
SHOWN = "red\\x00nul\\x9bcsi\ufffdbyte"  # what is left of it, and how

SCENARIO = f"""\
task: {{prompt: Print things.}}
solution:
  - |-
    printf '{HOSTILE}\\n'; exit 3
evaluation:
  gates:
    - type: command_succeeds
      command: |-
        printf '{HOSTILE}\\n' >&2; exit 1
"""
SETUP = f"""\
task: {{prompt: Never started.}}
setup:
  commands:
    - |-
      printf '{HOSTILE}'; exit 4
solution: ['true']
"""
# Raw in none of them: C0 controls but tab and newline, DEL, C1 controls.
UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def evaluated(project: Project) -> tuple[Project, list[str]]:
    """The two runs carried out, evaluated and reported; the console lines they made."""
    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/shows.yaml", SCENARIO)
    project.write("scenarios/setup.yaml", SETUP)
    loaded = load_project(project.root)
    plan = build_plan(loaded, Selection())
    out = io.StringIO()
    reporter = ProgressReporter.configure(
        {run.run_id: run.dir for run in plan.runs}, None, quiet=False
    )(out, {})
    lines = []
    for run in plan.runs:
        execute_run(loaded, run)
        reporter.add_success(SimpleNamespace(name=f"{run.run_id}:agent"))
        record = evaluate_run(loaded, run, ResultsStore(loaded.results_dir, loaded.redactor()))
        assert record is not None
        lines.append(_outcome_line(run.run_id, record))
        lines.append(render_evaluation(loaded, run)[1])
    aggregate(plan)
    return project, lines + out.getvalue().splitlines()


def test_no_terminal_sequence_or_control_character_reaches_a_report_raw(
    evaluated: tuple[Project, list[str]],
) -> None:
    project, _ = evaluated
    results = project.results()
    shows, setup = results / "shows/oracle/r1", results / "setup/oracle/r1"
    # The data keeps what was said.
    assert "\x1b]0;pwned\x07" in read_jsonl(shows / "events.jsonl")[2]["output"]
    assert "\x1b]0;pwned\x07" in project.json("setup/oracle/r1/run.json")["error"]
    for path in (
        results / "report.md",
        results / "report.html",
        results / "junit.xml",
        shows / "evaluation.md",
        setup / "evaluation.md",
    ):
        text = path.read_text(encoding="utf-8")
        assert not UNSHOWN.search(text), (path.name, UNSHOWN.findall(text))
        assert "\\x1b" not in text, path.name  # every sequence was whole: removed
    for run_id, panel in run_panels(results).items():  # report.html's, in report-runs/
        assert not UNSHOWN.search(panel), (run_id, UNSHOWN.findall(panel))
        assert "\\x1b" not in panel, run_id
    report = (results / "report.md").read_text()
    assert SHOWN in report  # the gate's reason, and the setup's error
    assert "setup command `printf" in report and "(exit 4): red\\x00nul" in report
    html = project.report_html()
    assert "red\\x00nul\\x9bcsi" in html  # the failed call's output and the transcript's end
    suite = ElementTree.parse(results / "junit.xml").getroot()
    said = {case.get("name"): case[0] for case in suite}
    assert said["shows/oracle/r1"].tag == "failure" and SHOWN in said["shows/oracle/r1"].text
    assert said["setup/oracle/r1"].tag == "error" and "red\\x00nul" in said["setup/oracle/r1"].text


def test_no_terminal_sequence_or_control_character_reaches_the_console(
    evaluated: tuple[Project, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    project, lines = evaluated
    capsys.readouterr()
    assert llmtt_main(["check", str(project.root)]) == 1
    checked = capsys.readouterr().out
    assert SHOWN in checked
    assert llmtt_main(["show", "shows/oracle/r1", "--project", str(project.root)]) == 0
    shown = capsys.readouterr().out
    assert "1. FAIL command_succeeds: `printf" in shown and SHOWN in shown
    said = "\n".join([*lines, checked, shown])
    assert not UNSHOWN.search(said), UNSHOWN.findall(said)
    assert "llmtt: setup/oracle/r1: could not be carried out: setup command" in said
    assert "llmtt: shows/oracle/r1: FAIL - gate 1 (command_succeeds)" in said
