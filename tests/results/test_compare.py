"""`llmtt compare A B` through the real executable, on results a real `doit run` wrote: it says
which side is A and which is B, pairs every variant, and names what it expected on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

LLMTT = str(Path(sys.executable).parent / "llmtt")


def llmtt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LLMTT, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with three variants, two repeats each; only v2's guidance passes the gate."""
    project = Project(tmp_path_factory.mktemp("compare"))
    for name, text in (("v1", "one"), ("v2", "two"), ("v3", "three")):
        project.write(f"guides/{name}.md", text + "\n")
    variants = "".join(
        f'\n[variants.{v}]\nfiles = {{ "AGENTS.md" = "guides/{v}.md" }}\n'
        for v in ("v1", "v2", "v3")
    )
    project.write(
        "llmtt.toml",
        GIT_TOML + variants + '\n[matrix]\nvariants = ["v1", "v2", "v3"]\nrepeats = 2\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Read AGENTS.md.}\nsolution: [cat AGENTS.md, git status]\n"
        "evaluation:\n  gates:\n    - {type: file_contains, path: AGENTS.md, substring: two}\n",
    )
    assert project.doit("run", "-n", "2").code == 0
    return project.root


def test_two_variants_of_the_current_results_say_which_is_a_and_which_is_b(
    results: Path,
) -> None:
    done = llmtt("compare", "v1", "v2", "--project", str(results))
    assert done.returncode == 0, done.stderr
    report = results / "llm-tool-test-results" / "report.json"
    lines = done.stdout.splitlines()
    assert lines[0] == f"A = v1 (variant of {report})"
    assert lines[1] == f"B = v2 (variant of {report})"
    # two pairs, both gains: far from decided, and the line says so
    assert "s / oracle: v2 vs v1: can't tell (about " in done.stdout, done.stdout
    assert "2 pairs, pass rate A 0 -> B 1 (B - A +1, interval -" in done.stdout
    assert "  total_commands: A 1 -> B 1 (+0, too few pairs for an interval)" in done.stdout
    # the other way round, the numbers follow the letters
    swapped = llmtt("compare", "v2", "v1", "--project", str(results))
    assert "pass rate A 1 -> B 0 (B - A -1, interval " in swapped.stdout, swapped.stdout


def test_the_baseline_comparison_as_json(results: Path) -> None:
    done = llmtt("compare", "--json", "--project", str(results))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["schema"] == 1
    comparison = found["comparison"]
    # no [compare] baseline: the first variant of the matrix, v1, and said so
    assert comparison["baselines"]["s"]["baseline"] == "v1"
    assert [(t["treatment"], t["baseline"]) for t in comparison["treatments"]] == [
        ("v2", "v1"),
        ("v3", "v1"),
    ]
    units = {u["treatment"]: u for u in comparison["units"]}
    assert (units["v2"]["gains"], units["v2"]["losses"], units["v3"]["difference"]) == (2, 0, 0)
    for unit in units.values():
        assert set(unit) >= {
            "baseline",
            "treatment",
            "pairs",
            "difference",
            "low",
            "high",
            "p_value",
            "verdict",
            "metrics",
        }
        assert unit["low"] <= unit["difference"] <= unit["high"]
    # the family: two units (each treatment's pooled row holds one), each at 1 - 0.05 / 2
    assert comparison["family"] == 2 and comparison["level"] == 0.975
    text = llmtt("compare", "--project", str(results))
    assert text.stdout.startswith("A = baseline\nB = treatments\n"), text.stdout
    assert "v2 vs v1: better 0, worse 0, no difference 0, can't tell 1; 2 pairs" in text.stdout


def test_two_result_sets_pair_every_variant(results: Path, tmp_path: Path) -> None:
    report = results / "llm-tool-test-results" / "report.json"
    old = tmp_path / "old.json"
    data = json.loads(report.read_text())
    # the old results: v3 was not run then, and v2 failed every run
    data["runs"] = [r for r in data["runs"] if r["variant"] != "v3"]
    for row in data["runs"]:
        row["outcome"] = "fail"
    old.write_text(json.dumps(data))
    done = llmtt("compare", str(old), str(report.parent))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"A = {old} (4 runs in {old})\nB = {report.parent} (6 runs in {report})\n"
    ), done.stdout
    assert "s / oracle / no model / v1: B vs A: " in done.stdout
    assert "2 pairs, pass rate A 0 -> B 0 (B - A +0," in done.stdout
    assert "2 pairs, pass rate A 0 -> B 1 (B - A +1," in done.stdout
    assert "oracle / no model / v3: not compared: only in B" in done.stdout


def test_one_variant_each_pairs_those_two(results: Path, tmp_path: Path) -> None:
    report = json.loads((results / "llm-tool-test-results" / "report.json").read_text())
    sides = []
    for name in ("v1", "v2"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"runs": [r for r in report["runs"] if r["variant"] == name]}))
        sides.append(str(path))
    done = llmtt("compare", *sides)
    assert done.returncode == 0, done.stderr
    assert "s / oracle / no model / v1 vs oracle / no model / v2: B vs A: " in done.stdout
    assert "2 pairs, pass rate A 0 -> B 1" in done.stdout


def test_bad_input_names_what_was_expected(results: Path, tmp_path: Path) -> None:
    project = str(results)
    unknown = llmtt("compare", "v1", "v9", "--project", project)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "'v9' is not a report.json, a results folder, or a variant" in unknown.stderr
    assert "their variants: v1, v2, v3" in unknown.stderr
    mixed = llmtt("compare", str(results / "llm-tool-test-results"), "v1", "--project", project)
    assert mixed.returncode == 2
    assert "compare takes two result sets or two variants; 'v1' is neither" in mixed.stderr
    same = llmtt("compare", "v1", "v1", "--project", project)
    assert same.returncode == 2 and "two different variants" in same.stderr
    one = llmtt("compare", "v1", "--project", project)
    assert one.returncode == 2 and "compare takes no side" in one.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    folder = llmtt("compare", str(empty), str(results / "llm-tool-test-results"))
    assert folder.returncode == 2 and f"{empty} holds no report.json" in folder.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"runs": []}))
    nothing = llmtt("compare", str(other), str(results / "llm-tool-test-results"))
    assert nothing.returncode == 2 and "nothing to compare" in nothing.stderr
    notreport = tmp_path / "list.json"
    notreport.write_text("[1, 2]")
    shape = llmtt("compare", str(notreport), str(other))
    assert shape.returncode == 2 and "expected an llmtt report.json" in shape.stderr
