"""`llmtt lint` end to end: a small CLI with every defect, git with a guidance file whose
examples run in a scenario's fixture, sqlite-utils; and the tune/holdout split and lint's
findings in the reports of real runs."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import BIN, GIT_TOML, Project

BADTOOL = Path(__file__).resolve().parents[1] / "data" / "lint" / "badtool"


def _lint(project: Project, *args: str) -> tuple[int, Any, str]:
    """`llmtt lint --json ARGS` in the project: exit code, its JSON, stderr."""
    done = subprocess.run(
        [str(BIN / "llmtt"), "lint", "--json", *args],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout else None, done.stderr


def _found(data: Any) -> set[tuple[str | None, str]]:
    return {(f.get("subcommand"), f["check"]) for f in data["findings"]}


def test_every_defect_of_a_small_cli_is_found_and_its_good_subcommand_has_none(
    project: Project,
) -> None:
    project.write("llmtt.toml", f'[target]\nbinary = "{BADTOOL}"\n')
    started = time.monotonic()
    code, data, err = _lint(project, "--timeout", "1")
    took = time.monotonic() - started
    assert code == 1, err  # errors found, at the default --fail-on error
    assert data["confined"] is True
    assert _found(data) == {
        ("plain", "help-example"),
        ("plain", "machine-output"),
        ("ask", "waits-for-input"),
        ("page", "pager"),
        ("edit", "editor"),
        ("edit", "wrong-call-exit"),
        ("edit", "wrong-call-hint"),
        ("lax", "wrong-call-exit"),
        ("lax", "wrong-call-hint"),
        ("wordy", "help-length"),
        ("wordy", "error-length"),
        ("nohelp", "help-missing"),
    }
    (target,) = data["targets"]
    assert [s["name"] for s in target["subcommands"]] == [
        "good", "plain", "ask", "page", "edit", "lax", "wordy", "nohelp"
    ]  # fmt: skip
    good = target["subcommands"][0]
    assert good["example"] and good["machine_output"] and good["help"] == "good --help"
    # the bare call of `good` (its usage requires NAME) was made, and failed as it should
    bare = [p for p in good["probes"] if p["argv"] == ["good"]]
    assert [(p["exit_code"], p["timed_out"]) for p in bare] == [(2, False)]
    assert took < 15
    # what is saved for the reports is what was printed
    saved = json.loads((project.results() / "lint.json").read_text())
    assert saved["findings"] == data["findings"]
    # only the subcommands asked for; `good` has nothing even at the lowest level
    code, data, _ = _lint(project, "--timeout", "1", "--subcommand", "good", "--fail-on", "info")
    assert code == 0 and _found(data) == set()
    code, data, _ = _lint(project, "--subcommand", "plain", "--fail-on", "warning")
    assert code == 1 and _found(data) == {("plain", "help-example"), ("plain", "machine-output")}


AGENTS = """\
# Working with git here

Check with `git status --porcelain`; `git stash list` shows what is put aside.
Never `git frobnicate`.

```bash
git init -q .
git add notes.txt
git commit -q -m "first"
git log --oneline
```

```console
$ git log --oneline --no-such-flag
abc first
```

```sh
test -f notes.txt
git show --stat HEAD > /dev/null
false
```
"""


def test_git_and_a_guidance_whose_examples_run_in_the_fixture(project: Project) -> None:
    project.write(
        "llmtt.toml",
        GIT_TOML + '[matrix]\nvariants = ["v1"]\n[variants.v1]\nfiles = {"AGENTS.md" = "g.md"}\n',
    )
    project.write("g.md", AGENTS)
    project.write("scenarios/fixtures/one/notes.txt", "hello\n")
    project.write("scenarios/s.yaml", "task: {prompt: x}\nfixture: fixtures/one\n")
    code, data, err = _lint(project, "--subcommand", "status,log,show,commit")
    assert code == 1, err
    (target,) = data["targets"]
    subs = {s["name"]: s for s in target["subcommands"]}
    assert set(subs) == {"status", "log", "show", "commit"}
    assert subs["status"]["machine_output"]  # --porcelain
    mine = [f for f in data["findings"] if f.get("file") == "g.md"]
    assert sorted((f["check"], f["line"]) for f in mine) == [
        ("example-fails", 14),  # the console example's one command
        ("example-fails", 21),  # `false`, the third example's third line
        ("unknown-command", 4),  # `git stash` is known though --help's list lacks it
        ("unknown-flag", 14),
    ]
    failed = next(f for f in mine if f["check"] == "example-fails" and f["line"] == 21)
    assert "failed (exit 1)" in failed["message"] and "at `false`" in failed["message"]
    (file,) = data["guidance"]
    assert file["as"] == "AGENTS.md" and file["scenarios"] == ["s"]
    # every example ran, in order, in one copy of the fixture: the commit saw notes.txt
    assert [(e["line"], e["exit_code"]) for e in file["examples"]] == [(6, 0), (13, 128), (18, 1)]
    assert not (project.root / "scenarios/fixtures/one/.git").exists()  # a copy, not the fixture


def test_sqlite_utils(project: Project) -> None:
    tool = BIN / "sqlite-utils"
    assert tool.exists(), f"{tool} missing: sqlite-utils is in the test requirements"
    project.write("llmtt.toml", '[target]\nbinary = "sqlite-utils"\n')
    code, data, err = _lint(project, "--subcommand", "query,insert,tables", "--fail-on", "never")
    assert code == 0, err
    (target,) = data["targets"]
    subs = {s["name"]: s for s in target["subcommands"]}
    assert set(subs) == {"query", "insert", "tables"}
    assert all(s["help"] for s in subs.values())
    assert subs["query"]["machine_output"] and subs["tables"]["machine_output"]
    # sqlite-utils insert's usage requires PATH TABLE FILE: called bare, it fails with a hint
    bare = next(p for p in subs["insert"]["probes"] if p["argv"] == ["insert"])
    assert bare["exit_code"] == 2
    assert ("insert", "wrong-call-exit") not in _found(data)


HOLDOUT = """\
task: {prompt: make a repository}
split: SPLIT
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""


def test_holdout_results_apart_and_lint_beside_the_agents_friction(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/tuned.yaml", HOLDOUT.replace("SPLIT", "tune"))
    project.write(
        "scenarios/held.yaml",
        HOLDOUT.replace("SPLIT", "holdout").replace("git init -q .", "git init -q . --nope"),
    )
    assert project.doit("run").code == 0
    report = project.json("report.json")
    assert report["splits"]["tune"]["passed"] == 1 and report["splits"]["holdout"]["failed"] == 1
    text = (project.results() / "report.md").read_text()
    assert (
        "| tune | 1 | 1 | 0 | 0 | 1 | 1 |" in text and "| holdout | 1 | 0 | 1 | 0 | 0 | 0 |" in text
    )
    assert "| init | 2 | 2 | 1 | 0 | 0 | 0 | 1 | not run |" in text
    html = (project.results() / "report.html").read_text()
    assert "<td><b>holdout</b></td><td>1</td><td>0</td><td>1</td><td>0</td>" in html
    assert "<td><b>init</b></td><td>2</td><td>2</td><td>1</td>" in html
    done = subprocess.run(
        [str(BIN / "llmtt"), "check"], cwd=project.root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "- tune: 1 runs, 1 passed, 0 failed; pass rate 1.0" in done.stdout
    assert "- holdout: 1 runs, 0 passed, 1 failed; pass rate 0.0" in done.stdout
    # lint's findings join the table; a new lint.json re-writes the reports, and only them
    assert _lint(project, "--subcommand", "init", "--fail-on", "never")[0] == 0
    again = project.doit("run")
    assert again.executed() == ["aggregate"], again.out
    text = (project.results() / "report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| init |"))
    assert "| 2 | 2 | 1 | 0 | 0 | 0 | 1 | info: its help offers no machine-readable output" in row
    html = (project.results() / "report.html").read_text()
    assert '<span class="">info: its help offers no machine-readable output' in html
    # with no holdout scenario, no split is shown
    project.write("scenarios/held.yaml", HOLDOUT.replace("SPLIT", "tune"))
    assert project.doit("run").code == 0
    assert "splits" not in project.json("report.json")
