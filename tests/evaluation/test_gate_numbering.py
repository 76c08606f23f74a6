"""Gates are numbered from 1 everywhere a person reads a number: gates.json `index`, the
outcome reason, evaluation.md, report.html's panels, junit.xml, the baseline's per-gate keys,
`llmtt check`, `llmtt show` and a load error (whose field path keeps its 0-based index)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

from conftest import GIT_TOML, Project

LLMTT = str(Path(sys.executable).parent / "llmtt")
SCENARIO = """\
task: {prompt: x}
solution: [git init -q ., touch a.txt]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
    - {type: file_exists, path: a.txt}
"""


def llmtt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LLMTT, *args], capture_output=True, text=True, timeout=60)


def test_the_second_gate_is_gate_2_everywhere(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", SCENARIO)
    assert project.doit("run").code == 0
    root = str(project.root)
    assert llmtt("bless", root).returncode == 0
    baseline = json.loads((project.root / "llmtt-baseline.json").read_text())
    assert baseline["groups"]["s/oracle/-/-"]["gate_names"] == {
        "1": "file_exists",
        "2": "file_exists",
    }
    # the second gate now fails
    project.write("scenarios/s.yaml", SCENARIO.replace(", touch a.txt", ""))
    assert project.doit("run").code == 0
    run = project.results() / "s/oracle/r1"
    gates = json.loads((run / "gates.json").read_text())["gates"]
    assert [(g["index"], g["passed"]) for g in gates] == [(1, True), (2, False)]
    reason = json.loads((run / "result.json").read_text())["outcome_reason"]
    assert reason.startswith("gate 2 (file_exists): "), reason
    assert "| 2 | file_exists | FAIL |" in (run / "evaluation.md").read_text()
    html = project.report_html()
    assert '<tr><td>2</td><td>file_exists</td><td class="fail">FAIL</td>' in html
    case = ET.parse(project.results() / "junit.xml").getroot().find("testcase/failure")
    assert case is not None and case.get("message", "").startswith("gate 2 (file_exists)")
    check = llmtt("check", root)
    assert check.returncode == 1
    assert "gate 2 (file_exists) passed in every baseline run" in check.stdout, check.stdout
    assert "s / oracle / no model / no variant: gate 2" in check.stdout
    show = llmtt("show", "s/oracle/r1", "--project", root)
    assert "2. FAIL file_exists" in show.stdout, show.stdout
    # a load error: the field path counts from 0 like every list, and says which gate it is
    project.write("scenarios/s.yaml", SCENARIO.replace("path: a.txt", "pth: a.txt"))
    bad = llmtt("validate", root)
    assert bad.returncode == 2
    assert "evaluation.gates[1]" in bad.stderr and "(gate 2)" in bad.stderr, bad.stderr
