"""doit reaches llmtt through a task loader (llmtt/taskgraph/loader.py, dodo.py): importing
`llmtt.tasks` does nothing by itself, and the project is held when doit asks for the tasks."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import GIT_TOML, Project


def llmtt_project(root: Path) -> Project:
    project = Project(root)
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    return project


def test_a_parallel_run_forks_its_workers_whatever_the_default_start_method(
    tmp_path: Path,
) -> None:
    """Python 3.14 starts multiprocessing's workers with forkserver: doit's would then start
    without what their parent holds for the invocation (here: fail to pickle the reporter).
    The loader has them forked."""
    project = llmtt_project(tmp_path / "proj")
    project.write("scenarios/b.yaml", "task: {prompt: y}\nsolution: [git init -q]\n")
    project.write(
        "dodo.py",
        "import multiprocessing\n"
        'multiprocessing.set_start_method("forkserver")\n'
        "from llmtt.tasks import *  # noqa: F403, E402\n",
    )
    done = project.doit("run", "-n", "2")
    assert done.code == 0, done
    assert "Traceback" not in done.err, done.err
    assert sorted(json.loads(line)["run_id"] for line in _results(project)) == [
        "a/oracle/r1",
        "b/oracle/r1",
    ]


def _results(project: Project) -> list[str]:
    return (project.results() / "results.jsonl").read_text().splitlines()
