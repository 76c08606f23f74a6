"""Laying out a run's workspace writes nothing outside it: variant destinations with `..`, absolute
paths, or under a folder the fixture links elsewhere fail the run instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.execution.workspace import WorkspaceError, prepare


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    path = tmp_path / "guide.md"
    path.write_text("variant guidance\n")
    return path


@pytest.mark.parametrize("dest", ["../../escaped.md", "sub/../../escaped.md", "..", ""])
def test_a_destination_leading_out_fails_and_writes_nothing(
    tmp_path: Path, guide: Path, dest: str
) -> None:
    with pytest.raises(WorkspaceError, match="would be written outside the workspace"):
        prepare(tmp_path / "results" / "run", None, {dest: guide})
    assert not (tmp_path / "results" / "escaped.md").exists()
    assert not (tmp_path / "escaped.md").exists()


def test_an_absolute_destination_fails_and_writes_nothing(tmp_path: Path, guide: Path) -> None:
    target = tmp_path / "elsewhere" / "AGENTS.md"
    with pytest.raises(WorkspaceError, match=f"'{target}' would be written outside"):
        prepare(tmp_path / "run", None, {str(target): guide})
    assert not (tmp_path / "elsewhere").exists()


def test_a_destination_under_a_linked_folder_fails_and_writes_nothing(
    tmp_path: Path, guide: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "docs").symlink_to(outside)
    for dest in ("docs/AGENTS.md", "docs/new/AGENTS.md"):
        with pytest.raises(WorkspaceError, match=f"to {outside}"):
            prepare(tmp_path / "run", fixture, {dest: guide})
    assert list(outside.iterdir()) == []


def test_a_link_at_the_destination_is_replaced_not_written_through(
    tmp_path: Path, guide: Path
) -> None:
    kept = tmp_path / "users-own.md"
    kept.write_text("not to be overwritten\n")
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "AGENTS.md").symlink_to(kept)
    (fixture / "docs").mkdir()
    (fixture / "up").symlink_to("docs")  # a folder linked inside the workspace is fine
    ws = prepare(tmp_path / "run", fixture, {"AGENTS.md": guide, "up/GUIDE.md": guide})
    assert kept.read_text() == "not to be overwritten\n"
    assert not (ws.workspace / "AGENTS.md").is_symlink()
    assert (ws.workspace / "AGENTS.md").read_text() == "variant guidance\n"
    assert (ws.workspace / "docs" / "GUIDE.md").read_text() == "variant guidance\n"


def test_a_run_whose_variant_file_would_leave_the_workspace_is_not_carried_out(
    project: Project,
) -> None:
    outside = project.root / "outside"
    outside.mkdir(parents=True)
    project.write(
        "llmtt.toml",
        GIT_TOML + '\n[variants.v]\nfiles = { "docs/AGENTS.md" = "guides/v.md" }\n'
        '\n[matrix]\nvariants = ["v"]\n',
    )
    project.write("guides/v.md", "guidance\n")
    project.write("scenarios/fixtures/f/readme.txt", "hello\n")
    (project.root / "scenarios/fixtures/f/docs").symlink_to(outside)
    project.write(
        "scenarios/s.yaml",
        """\
        task: {prompt: Read the docs.}
        fixture: fixtures/f
        solution: [cat docs/AGENTS.md]
        evaluation:
          gates:
            - {type: file_exists, path: readme.txt}
        """,
    )
    result = project.doit("run")
    assert result.code != 0
    assert list(outside.iterdir()) == []
    info = project.json("s/oracle-v/r1/run.json")
    assert info["status"] == "error"
    assert "variant file 'docs/AGENTS.md' would be written outside the workspace" in info["error"]
    assert project.json("s/oracle-v/r1/metrics.json")["outcome"] == "error"
