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
    assert (
        'class="baseline"' in section and "oracle / no model / no variant (baseline 1)" in section
    )
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


def test_a_line_per_agent_model_variant_so_a_change_of_selection_is_no_dip(
    project: Project,
) -> None:
    """Invocations that select other agents are not one line: the project's pass rate would
    go 0.5 -> 1 -> 0 though no agent did better or worse. Each agent / model / variant is its
    own line, with its own baseline, named in the legend."""
    from llmtt.results.trends import history as trend
    from llmtt.util.atomic import read_json

    idle = '\n[agents.idle]\ncommand = ["true"]\nfree = true\n'  # does nothing: the gate fails
    project.write("llmtt.toml", GIT_TOML + idle + '\n[matrix]\nagents = ["oracle", "idle"]\n')
    project.write("scenarios/a.yaml", SCENARIO.format(name="a", path=".git/HEAD"))
    project.write("scenarios/b.yaml", SCENARIO.format(name="b", path=".git/HEAD"))
    assert project.doit("run", env={"LLMTT_LABEL": "v1"}).code == 0
    bless = subprocess.run(
        [str(BIN / "llmtt"), "bless"], cwd=project.root, capture_output=True, text=True
    )
    assert bless.returncode == 0, bless.stderr
    for label, agent in (("v2", "oracle"), ("v3", "idle")):
        ran = project.doit("run", f"agent={agent}", "repeats=2", env={"LLMTT_LABEL": label})
        assert ran.code == 0, ran.out + ran.err
    html = (project.results() / "report.html").read_text()
    assert [(p[0], p[3]) for p in overall(html)] == [("v1", "0.5"), ("v2", "1"), ("v3", "0")]

    baseline = read_json(project.root / "llmtt-baseline.json")
    data = trend(project.results() / "results.db", baseline)
    lines = {(line["agent"], line["baseline"]): line["points"] for line in data["lines"]}
    assert {k: [(p["point"], p["runs"], p["passed"]) for p in v] for k, v in lines.items()} == {
        ("idle", 0.0): [("v1", 2, 0), ("v3", 2, 0)],
        ("oracle", 1.0): [("v1", 2, 2), ("v2", 2, 2)],
    }
    assert data["more_lines"] == 0
    chart = history(project).split("<svg", 1)[1].split("</svg>", 1)[0]
    assert chart.count("<polyline") == 2 and chart.count('class="baseline"') == 2
    assert "idle / no model / no variant (baseline 0)" in chart
    assert "oracle / no model / no variant (baseline 1)" in chart
    assert ">pass rate</text>" in chart and ">invocation of doit run (oldest to newest)<" in chart
    assert "idle / no model / no variant at v3: 0/2 passed (2 scenarios" in chart


def test_at_most_eight_lines_are_drawn_the_most_recently_evaluated(tmp_path: Path) -> None:
    import json

    from llmtt.results.store import sync_results_db
    from llmtt.results.trends import LINES
    from llmtt.results.trends import history as trend

    jsonl = tmp_path / "results.jsonl"
    records = [
        {
            "run_id": f"s/agent{n}/r1",
            "scenario": "s",
            "agent": f"agent{n}",
            "outcome": "pass",
            "invocation": f"v{n // 4}",
            "timestamp": "2026-01-02T03:04:05+00:00",
        }
        for n in range(LINES + 2)
    ]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    sync_results_db(jsonl)
    baseline = {"groups": {"s/agent9/-/-": {"runs": 2, "pass_rate": 0.5}}}
    data = trend(tmp_path / "results.db", baseline)
    assert [line["agent"] for line in data["lines"]] == [f"agent{n}" for n in range(2, 10)]
    assert data["more_lines"] == 2 and data["points"] == ["v0", "v1", "v2"]
    assert [line["baseline"] for line in data["lines"]][-1] == 0.5
    assert {line["baseline"] for line in data["lines"][:-1]} == {None}
