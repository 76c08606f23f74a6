"""report.html's history: pass rate and cost per invocation of `doit run`, from results.db, with
the baseline marked; each run's evaluation counted once per invocation."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import BIN, GIT_TOML, Project
from test_html_report import measure

SCENARIO = """\
name: {name}
task: {{prompt: Make a repository.}}
solution: [git init -q .]
evaluation:
  gates:
    - {{type: file_exists, path: {path}}}
"""


def overall(html: str) -> list[tuple[str, ...]]:
    """The history's table of invocations: (invocation, runs, passed, pass rate, cost)."""
    section = html.split("<h2>History</h2>", 1)[1].split("<h2>", 1)[0]
    table = section.split("<table>", 1)[1].split("</table>", 1)[0]
    return [
        tuple(re.findall(r"<td>(.*?)</td>", row)) for row in re.findall(r"<tr><td>.*?</tr>", table)
    ]


def history(project: Project) -> str:
    html = (project.results() / "report.html").read_text()
    return html.split("<h2>History</h2>", 1)[1].split("<h2>Runs</h2>", 1)[0]


def test_each_invocation_is_a_point_and_the_baseline_is_marked(
    project: Project, tmp_path: Path
) -> None:
    project.write("llmtt.toml", GIT_TOML + "\n[matrix]\nrepeats = 2\n")
    project.write("scenarios/a.yaml", SCENARIO.format(name="a", path=".git/HEAD"))
    project.write("scenarios/b.yaml", SCENARIO.format(name="b", path=".git/HEAD"))
    first = project.doit("run", env={"LLMTT_LABEL": "v1"})
    assert first.code == 0, first.out + first.err
    assert "History starts once results.db holds a second invocation" in history(project)
    assert "it holds one: v1" in history(project)
    bless = subprocess.run(
        [str(BIN / "llmtt"), "bless"], cwd=project.root, capture_output=True, text=True
    )
    assert bless.returncode == 0, bless.stderr
    # The reports compare against the baseline: blessing re-writes them, and only them.
    blessed = project.doit("run", env={"LLMTT_LABEL": "v1"})
    assert blessed.code == 0 and blessed.executed() == ["aggregate"], blessed.out
    assert project.json("report.json")["baseline"] == "llmtt-baseline.json"

    # Scenario b's gate now fails: its two runs are evaluated again (not re-run).
    project.write("scenarios/b.yaml", SCENARIO.format(name="b", path=".git/NOPE"))
    second = project.doit("run", env={"LLMTT_LABEL": "v2"})
    assert second.code == 0, second.out + second.err
    html = (project.results() / "report.html").read_text()
    assert overall(html) == [("v1", "4", "4", "1", "0"), ("v2", "2", "0", "0", "0")]
    section = history(project)
    assert 'class="baseline"' in section and "baseline 100%" in section
    rows = dict(re.findall(r"<tr><td>([^<]*)</td>(.*?)</tr>", section.split('class="history"')[1]))
    assert "b / oracle / no model / no variant" in rows
    b = rows["b / oracle / no model / no variant"]
    assert re.findall(r'class="hpoint( fail)?" title="(v\d)">([^<]*)<', b) == [
        ("", "v1", "1 (2 runs, 0)"),
        (" fail", "v2", "0 (2 runs, 0)"),  # below the baseline
    ]
    a = rows["a / oracle / no model / no variant"]
    assert re.findall(r'title="(v\d)">([^<]*)<', a) == [("v1", "1 (2 runs, 0)")]
    # The section fits an 800 px window too (real headless Chromium).
    viewport, width, wide = measure(tmp_path, project.results() / "report.html")
    assert viewport == 800 and width <= 800 and wide == "", (width, wide)
    assert "<polyline" in section

    # Nothing pending: nothing runs, the history stays as it was.
    again = project.doit("run", env={"LLMTT_LABEL": "v3"})
    assert again.code == 0 and again.executed() == [], again.out
    assert overall((project.results() / "report.html").read_text())[-1][0] == "v2"

    # Unlabelled, an invocation is named by when it began; a re-evaluation within one
    # invocation of what another evaluated counts once, in its own point.
    project.write("scenarios/a.yaml", SCENARIO.format(name="a", path=".git/config"))
    third = project.doit("run")
    assert third.code == 0, third.out + third.err
    points = overall((project.results() / "report.html").read_text())
    assert [p[:3] for p in points[:2]] == [("v1", "4", "4"), ("v2", "2", "0")]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", points[2][0]), points
    assert points[2][1:3] == ("2", "2")


def test_records_without_an_invocation_fall_back_to_their_day(project: Project) -> None:
    """Records written before invocations were recorded are grouped by their day."""
    import json

    from llmtt.results.store import sync_results_db
    from llmtt.results.trends import history as trend

    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", SCENARIO.format(name="a", path=".git/HEAD"))
    assert project.doit("run", env={"LLMTT_LABEL": "now"}).code == 0
    jsonl = project.results() / "results.jsonl"
    (line,) = jsonl.read_text().splitlines()
    old = {**json.loads(line), "outcome": "fail", "timestamp": "2026-01-02T03:04:05+00:00"}
    del old["invocation"]
    jsonl.write_text(json.dumps(old) + "\n" + line + "\n")  # an older llmtt's line first
    (project.results() / "results.db").unlink()
    sync_results_db(jsonl)  # rebuilt from results.jsonl, as after a deleted results.db
    data = trend(project.results() / "results.db", None)
    assert data["points"] == ["2026-01-02", "now"]
    assert [(p["runs"], p["passed"]) for p in data["overall"]] == [(1, 0), (1, 1)]
