"""The comparison with the baseline: designs per scenario (a scenario without variants hides
nothing), pairing by scenario / agent / model / repeat with errors left out, the family's
level, the verdicts, the guidance's cost and the per-subcommand changes; the no-guidance
control through real doit runs; [compare] mistakes named with file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_TOML, TOOL_TOML, Project

from llmtt.errors import ConfigError
from llmtt.execution.workspace import WorkspaceError, prepare
from llmtt.plan.runs import build_plan
from llmtt.results.comparison import ScenarioDesign, compare_runs, shown_end, subcommand_changes
from llmtt.results.inference import interval_level
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection
from llmtt.taskgraph.session import adaptive_round


def row(
    scenario: str,
    variant: str | None,
    repeat: int,
    outcome: str,
    *,
    cost: float | None = 0.01,
    tokens: int = 1000,
    subs: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "agent": "litellm",
        "model": "m",
        "variant": variant,
        "repeat": repeat,
        "outcome": outcome,
        "cost_usd": cost,
        "duration_secs": 2.0,
        "metrics": {
            "input_tokens": tokens,
            "cache_read_tokens": 100,
            "error_rate": 0.5 if outcome == "fail" else 0.0,
            "total_commands": 2,
            "by_subcommand": subs or {},
        },
    }


def test_a_scenario_without_variants_hides_nothing_and_errors_leave_their_pair_out() -> None:
    rows = [row("plain", None, k, "pass") for k in range(1, 4)]  # no variants: no comparison
    rows += [row("ab", "v1", k, "fail", cost=0.01, tokens=1000) for k in range(1, 31)]
    rows += [row("ab", "v2", k, "pass", cost=0.03, tokens=1500) for k in range(1, 31)]
    rows[3 + 29]["outcome"] = "error"  # v1's repeat 30 was not carried out: pair 30 is out
    design = ScenarioDesign("v1", "[compare] baseline", ("v2",), 0.1)
    found = compare_runs(rows, {"ab": design})
    assert found is not None
    (unit,) = found["units"]
    assert (unit["scenario"], unit["baseline"], unit["treatment"]) == ("ab", "v1", "v2")
    assert (unit["pairs"], unit["gains"], unit["losses"]) == (29, 29, 0)
    assert unit["verdict"] == "better" and unit["low"] > 0
    # one unit: its pooled row is the same numbers, no second comparison and no verdict
    assert found["family"] == 1 and found["level"] == round(interval_level(1), 6)
    (treatment,) = found["treatments"]
    assert treatment["verdicts"] == {"better": 1, "worse": 0, "no_difference": 0, "cant_tell": 0}
    assert treatment["verdict"] is None and (treatment["low"], treatment["high"]) == (
        unit["low"],
        unit["high"],
    )
    cost = treatment["guidance_cost"]
    assert cost["extra_prompt_tokens_per_run"] == 500  # cached tokens count as prompt too
    assert cost["extra_usd_per_run"] == pytest.approx(0.02)
    assert cost["lift_per_usd"] == pytest.approx(1 / 0.02)  # +1 pass rate for 2 cents a run
    metrics = unit["metrics"]
    assert metrics["error_rate"]["difference"] == -0.5 and metrics["error_rate"]["low"] == -0.5
    assert metrics["cost_usd"]["low"] <= 0.02 <= metrics["cost_usd"]["high"]


def test_an_unknown_cost_is_no_cost_and_few_pairs_say_so() -> None:
    rows = [row("ab", "v1", k, "pass", cost=None) for k in (1, 2)]
    rows += [row("ab", "v2", k, "fail", cost=None) for k in (1, 2)]
    found = compare_runs(rows, {"ab": ScenarioDesign("v1", "x", ("v2",), 0.1)})
    assert found is not None
    (unit,) = found["units"]
    assert unit["verdict"] == "cant_tell" and unit["more_pairs"] >= 1
    assert unit["metrics"]["cost_usd"] is None  # no run had a known cost: not 0
    assert unit["metrics"]["total_commands"]["low"] is None  # 2 pairs: no interval
    assert found["treatments"][0]["guidance_cost"]["lift_per_usd"] is None


def test_no_repeat_on_both_sides_is_said_not_hidden() -> None:
    rows = [row("ab", "v1", 1, "pass"), row("ab", "v2", 2, "pass")]
    found = compare_runs(rows, {"ab": ScenarioDesign("v1", "x", ("v2",), 0.1)})
    assert found is not None and found["units"] == []
    (note,) = found["not_compared"]
    assert note["scenario"] == "ab" and note["reason"] == "no repeat finished on both sides"
    assert "pairs" not in found["treatments"][0]


def test_the_control_compares_every_variant_including_the_baseline() -> None:
    rows = [row("ab", v, k, "pass") for v in ("v1", "v2", "no-guidance") for k in (1, 2, 3)]
    design = ScenarioDesign("v1", "x", ("v2",), 0.1, control="no-guidance")
    found = compare_runs(rows, {"ab": design})
    assert found is not None
    assert [(u["treatment"], u["baseline"], u["against_control"]) for u in found["units"]] == [
        ("v2", "v1", False),
        ("v1", "no-guidance", True),
        ("v2", "no-guidance", True),
    ]
    assert found["family"] == 3  # three units; each pooled row holds one of them


def test_subcommands_that_got_easier_or_harder() -> None:
    a = row("s", "v1", 1, "fail", subs={"query": {"count": 3, "errors": 2, "retries": 1}})
    b = row(
        "s",
        "v2",
        1,
        "pass",
        subs={"query": {"count": 1, "errors": 0, "retries": 0}, "serve": {"count": 2, "errors": 1}},
    )
    changes = {c["subcommand"]: c for c in subcommand_changes([(a, b)])}
    assert changes["query"]["change"] == "easier"
    assert changes["query"]["a"] == {"calls": 3, "errors": 2, "retries": 1, "help": 0}
    assert changes["serve"]["change"] == "harder"  # a record without retries counts none


def test_the_control_and_a_baseline_through_doit(project: Project) -> None:
    project.write("guides/terse.md", "terse\n")
    project.write("guides/rich.md", "rich: say two\n")
    project.write("fixture/AGENTS.md", "the fixture's own guidance\n")
    project.write(
        "llmtt.toml",
        GIT_TOML + '\n[variants.terse]\nfiles = { "AGENTS.md" = "guides/terse.md" }\n'
        '\n[variants.rich]\nfiles = { "AGENTS.md" = "guides/rich.md" }\n'
        '\n[compare]\nbaseline = "terse"\ncontrol = true\n',
    )
    # only one scenario sets variants (the bug: its comparison vanished beside the other)
    project.write(
        "scenarios/ab.yaml",
        "task: {prompt: Read AGENTS.md.}\nfixture: ../fixture\n"
        "matrix: {variants: [rich, terse], repeats: 2}\n"
        "solution: ['cat AGENTS.md || true']\n"
        "evaluation:\n  gates:\n    - {type: file_contains, path: AGENTS.md, substring: two}\n",
    )
    project.write("scenarios/plain.yaml", "task: {prompt: x}\nsolution: [git init -q .]\n")
    result = project.doit("run", "-n", "2")
    assert result.code == 0, result.out + result.err
    control = project.results() / "ab" / "oracle-no-guidance" / "r1" / "workspace"
    assert control.is_dir() and not (control / "AGENTS.md").exists()
    assert (project.results() / "ab" / "oracle-terse" / "r1" / "workspace" / "AGENTS.md").exists()
    comparison = project.json("report.json")["comparison"]
    assert comparison["baselines"] == {
        "ab": {"baseline": "terse", "named_by": "[compare] baseline", "min_effect": 0.1}
    }
    units = [(u["treatment"], u["baseline"], u["gains"]) for u in comparison["units"]]
    assert units == [("rich", "terse", 2), ("terse", "no-guidance", 0), ("rich", "no-guidance", 2)]
    text = (project.results() / "report.md").read_text()
    assert "| rich | terse | 2 | 0 | 0 | 0 | 1 | 0 -> 1 |" in text
    assert "| rich | no-guidance (no guidance) | 2 |" in text


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[compare]\nbaseline = "v9"\n',
            "llmtt.toml:2: compare.baseline: no [variants.v9] table in llmtt.toml",
        ),
        (
            "[variants.no-guidance]\nfiles = {}\n",
            "llmtt.toml:1: variants.no-guidance: 'no-guidance' is the name of llmtt's "
            "no-guidance control",
        ),
        (
            '[matrix]\nvariants = ["no-guidance"]\n',
            "'no-guidance' is the no-guidance control, which runs only with [compare] control",
        ),
        ("[compare]\nmin_effect = 1.5\n", "compare.min_effect"),
    ],
)
def test_compare_mistakes_name_file_line_and_field(project: Project, toml: str, said: str) -> None:
    project.write("llmtt.toml", toml)
    project.write("scenarios/s.yaml", "task: {prompt: x}\n")
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    assert said in str(caught.value), str(caught.value)


def test_a_scenario_names_its_own_baseline(project: Project) -> None:
    project.write("llmtt.toml", "[variants.a]\nfiles = {}\n[variants.b]\nfiles = {}\n")
    project.write("scenarios/s.yaml", "task: {prompt: x}\ncompare: {baseline: c}\n")
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    assert "s.yaml:2: compare.baseline: no [variants.c] table in llmtt.toml" in str(caught.value)


def test_a_pooled_row_of_several_units_is_a_comparison_of_its_own() -> None:
    rows = [row(s, "v1", k, "fail") for s in ("a", "b") for k in range(1, 21)]
    rows += [row(s, "v2", k, "pass") for s in ("a", "b") for k in range(1, 21)]
    design = ScenarioDesign("v1", "x", ("v2",), 0.1)
    found = compare_runs(rows, {"a": design, "b": design})
    assert found is not None and found["family"] == 3  # two units and their pooled row
    (treatment,) = found["treatments"]
    assert treatment["pairs"] == 40 and treatment["verdict"] == "better"
    adaptive = compare_runs(rows, {"a": design, "b": design}, looks=4)
    assert adaptive is not None and adaptive["family"] == 2  # under looks: no pooled verdict
    assert adaptive["treatments"][0]["verdict"] is None


@pytest.mark.parametrize(
    ("value", "effect", "shown"),
    [
        (0.00023, 0.1, "+0.0002"),  # above 0: never written as 0
        (0.0999604, 0.1, "+0.09996"),  # inside min_effect: never written as it
        (-0.10002, 0.1, "-0.10002"),
        (0.25, 0.1, "+0.25"),
        (0.0, 0.1, "0"),
        (-1.0, 0.1, "-1"),
        (None, 0.1, "n/a"),
    ],
)
def test_interval_ends_keep_their_side_of_0_and_min_effect(
    value: float | None, effect: float, shown: str
) -> None:
    assert shown_end(value, effect) == shown


def test_the_control_removes_guidance_inside_the_workspace_only(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("the user's own\n")
    fixture = tmp_path / "fixture"
    (fixture / "docs").mkdir(parents=True)
    (fixture / "AGENTS.md").write_text("fixture guidance\n")
    (fixture / "docs" / "GUIDE.md").write_text("more\n")
    (fixture / "linked").symlink_to(outside)
    (fixture / "CLAUDE.md").symlink_to(outside / "AGENTS.md")
    ws = prepare(tmp_path / "run", fixture, {}, ["AGENTS.md", "docs/GUIDE.md", "CLAUDE.md", "gone"])
    assert not (ws.workspace / "AGENTS.md").exists()
    assert not (ws.workspace / "docs" / "GUIDE.md").exists()
    assert not (ws.workspace / "CLAUDE.md").is_symlink()  # the link goes, not what it names
    assert (outside / "AGENTS.md").read_text() == "the user's own\n"
    for dest in ("../outside/AGENTS.md", "linked/AGENTS.md", str(outside / "AGENTS.md")):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            prepare(tmp_path / "run", fixture, {}, [dest])
    assert (outside / "AGENTS.md").read_text() == "the user's own\n"


@pytest.mark.parametrize(
    ("toml", "scenario", "said"),
    [
        (
            '[variants.a]\nfiles = {}\n[variants.b]\nfiles = {}\n[compare]\nbaseline = "a"\n',
            "task: {prompt: x}\nmatrix: {variants: [b, none]}\n",
            "s.yaml:2: matrix.variants: the baseline 'a' ([compare] baseline) is not among the "
            "scenario's variants (b, none)",
        ),
        (
            '[variants.a]\nfiles = {}\n[compare]\nbaseline = "no-guidance"\ncontrol = true\n',
            "task: {prompt: x}\n",
            "llmtt.toml:4: compare.baseline: 'no-guidance', the no-guidance control, cannot be "
            "the baseline",
        ),
    ],
)
def test_a_baseline_that_compares_nothing_is_refused(
    project: Project, toml: str, scenario: str, said: str
) -> None:
    project.write("llmtt.toml", toml)
    project.write("scenarios/s.yaml", scenario)
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    assert said in str(caught.value), str(caught.value)


def test_repeats_auto_leaves_a_scenario_it_does_not_compare_at_its_repeats(
    project: Project,
) -> None:
    project.write(
        "llmtt.toml",
        "[variants.v1]\nfiles = {}\n[variants.x]\nfiles = {}\n[variants.y]\nfiles = {}\n"
        '[compare]\nbaseline = "v1"\nmax_repeats = 10\n[matrix]\nrepeats = 2\n' + TOOL_TOML,
    )
    project.write("scenarios/s.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    chosen = Selection(variants=("x", "y"), adaptive=True)  # no baseline among them
    selection, rounds = adaptive_round(project.root, chosen)
    assert rounds == {} and selection.rounds == ()
    plan = build_plan(load_project(project.root), selection)
    assert sorted(r.repeat for r in plan.runs) == [1, 1, 2, 2]  # not max_repeats
    compared = Selection(variants=("v1", "x"), adaptive=True)
    selection, rounds = adaptive_round(project.root, compared)
    assert rounds["s"].repeats == 5 and rounds["s"].status == "running"  # round 1 of 2
    assert len(build_plan(load_project(project.root), selection).runs) == 10
