"""`llmtt import llm-tool-test` in this process: where it finds a file's paths, and what makes it
refuse a file (located, nothing written) rather than write one `llmtt validate` would reject."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.importers.llm_tool_test import import_llm_tool_test

SCENARIO = "name: {name}\ndescription: d\n{target}template_folder: {folder}\ntask: {{prompt: x}}\n"


def seed_project(project: Project, monkeypatch: pytest.MonkeyPatch, toml: str = GIT_TOML) -> Path:
    """An llmtt project with a seed project inside it (seed/fixtures, its template `t`)."""
    project.write("llmtt.toml", toml)
    project.write("seed/fixtures/templates/t/README.md", "hi\n")
    monkeypatch.chdir(project.root)
    return project.root / "seed" / "fixtures"


def test_the_template_folder_is_found_as_the_seed_finds_it(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixtures = seed_project(project, monkeypatch)
    project.write("seed/fixtures/own/README.md", "beside\n")
    project.write("seed/other/README.md", "from the project\n")
    files = []
    for name, folder in (("a", "t"), ("b", "own"), ("c", "seed/other")):
        files.append(fixtures / f"{name}.yaml")
        files[-1].write_text(SCENARIO.format(name=name, target="", folder=folder))
    done = import_llm_tool_test(files, project.root / "scenarios")
    assert done.problems == []
    made = {p.stem: p.read_text() for p in done.written}
    assert "fixture: ../seed/fixtures/templates/t\n" in made["a"]  # FIXTURES/templates/<name>
    assert "fixture: ../seed/fixtures/own\n" in made["b"]  # beside the file (ax-eval)
    assert "fixture: ../seed/other\n" in made["c"]  # from the project's folder (ax-eval)


def test_what_validate_would_reject_is_refused_with_its_line(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fixtures = seed_project(project, monkeypatch, toml="[judge]\nmodel = 'm'\n")
    outside = tmp_path / "elsewhere"
    (outside / "templates" / "t").mkdir(parents=True)
    cases = {
        # llmtt.toml's [target] names no binary, and neither does the file.
        "untargeted": SCENARIO.format(name="u", target="target: from_config\n", folder="t"),
        # A retired gate needs the binary it becomes a command of.
        "gated": SCENARIO.format(name="g", target="", folder="t")
        + "evaluation:\n  gates:\n    - {type: MinNotes, count: 1}\n",
        "mcp": SCENARIO.format(name="m", target="target: {kind: mcp, name: n}\n", folder="t"),
    }
    files = []
    for name, text in cases.items():
        files.append(fixtures / f"{name}.yaml")
        files[-1].write_text(text)
    files.append(outside / "far.yaml")
    files[-1].write_text(SCENARIO.format(name="far", target="target: {binary: git}\n", folder="t"))
    done = import_llm_tool_test(files, project.root / "scenarios")
    assert done.written == []
    said = "\n".join(done.problems)
    assert f"{fixtures}/untargeted.yaml:3: target: no target tool: neither the file's" in said
    assert f"{fixtures}/gated.yaml:7: evaluation.gates[0].type: the retired gate MinNotes" in said
    assert f"{fixtures}/mcp.yaml:3: target.kind: a target of kind 'mcp' has no llmtt" in said
    assert (
        f"{outside}/far.yaml:4: template_folder: the template folder {outside}/templates/t lies "
        f"outside the llmtt project {project.root}"
    ) in said
    assert all(p.endswith("; not imported") for p in done.problems)


def test_a_judge_needs_a_model_to_be_imported(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixtures = seed_project(project, monkeypatch)
    project.write(
        "seed/fixtures/rubrics/r.yaml", "criteria:\n  - {id: a, weight: 1, description: d}\n"
    )
    path = fixtures / "j.yaml"
    path.write_text(
        SCENARIO.format(name="j", target="", folder="t")
        + "evaluation:\n  judge: {enabled: true, rubric: rubrics/r.yaml, pass_threshold: 0.5}\n"
    )
    monkeypatch.delenv("LLMTT_JUDGE", raising=False)
    refused = import_llm_tool_test([path], project.root / "scenarios")
    assert (
        "j.yaml:6: evaluation.judge.enabled: the judge is enabled and no judge model"
        in (refused.problems[0])
    )
    monkeypatch.setenv("LLMTT_JUDGE", "m")
    done = import_llm_tool_test([path], project.root / "scenarios")
    assert done.problems == [] and "rubric: seed/fixtures/rubrics/r.yaml" in (
        done.written[0].read_text()
    )
