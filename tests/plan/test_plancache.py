"""The plan cache: reused only while no input moved, and always equal to a full build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.plan import cache as plancache
from llmtt.plan.cache import RunSpec, TaskPlan
from llmtt.plan.runs import build_plan
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

TOML = (
    GIT_TOML
    + """
[variants.v1]
files = { "AGENTS.md" = "guides/v1.md" }

[matrix]
variants = ["none", "v1"]

[evaluators]
own = "plancache_evaluators:Own"
"""
)

# The project's own evaluator, and a project module it imports: their code is an input.
EVALUATORS = """\
from llmtt.evaluation.evaluators.base import EvaluationResult, Evaluator
from plancache_helper import WORD


class Own(Evaluator):
    type = "own"

    def evaluate(self, input, criteria):
        return [EvaluationResult(c.name, True, self.type, reasoning=WORD) for c in criteria]
"""

SCENARIO = """\
name: demo
task: {prompt: Do it.}
fixture: fixtures/f
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""

JUDGED = """\
name: judged
task: {prompt: Judge me.}
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
  judge: {enabled: true, rubric: rubrics/r.yaml}
  evaluators:
    - type: own
      criteria: [{name: mine, scale: binary}]
"""

RUBRIC = """\
name: r
criteria:
  - {id: a, weight: 1.0, description: Does it.}
"""


def settle(root: Path) -> None:
    """Age every file and folder of the project: the cache refuses inputs changed just now."""
    past = time.time() - 60
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (past, past), follow_symlinks=False)
        os.utime(dirpath, (past, past))


def full(root: Path, selection: Selection) -> TaskPlan:
    return TaskPlan.of(build_plan(load_project(root), selection))


@pytest.fixture
def demo(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    project.write("llmtt.toml", TOML)
    project.write("scenarios/fixtures/f/file.txt", "one\n")
    (project.root / "scenarios/fixtures/f/link").symlink_to("file.txt")
    project.write("scenarios/demo.yaml", SCENARIO)
    project.write("scenarios/judged.yaml", JUDGED)
    project.write("rubrics/r.yaml", RUBRIC)
    project.write("guides/v1.md", "use git\n")
    project.write("plancache_evaluators.py", EVALUATORS)
    project.write("plancache_helper.py", 'WORD = "one"\n')
    bin_dir = tmp_path / "bin"  # where a test may put another `git` in front of the real one
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LLMTT_JUDGE", "judge-a")
    settle(tmp_path)
    return project


def test_second_load_is_a_hit_and_equals_a_full_build(demo: Project) -> None:
    selection = Selection()
    first, built = plancache.load(demo.root, selection)
    assert built is not None
    assert plancache.cache_file(demo.root, selection).is_file()  # type: ignore[union-attr]
    second, rebuilt = plancache.load(demo.root, selection)
    assert rebuilt is None, "the second load should come from the cache"
    assert second == first == full(demo.root, selection)
    assert len(second.runs) == 4 and {"judge"} <= set(second.runs[2].keys)
    # Another selection has its own cache entry.
    narrowed, built = plancache.load(demo.root, Selection(scenarios=("demo",)))
    assert built is not None and [r.run_id for r in narrowed.runs] == [
        "demo/oracle/r1",
        "demo/oracle-v1/r1",
    ]


def _same_size_edit(path: Path, old: str, new: str) -> None:
    """Rewrite a file to the same size and put its modification time back."""
    assert len(old) == len(new)
    before = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _git_in_front(root: Path) -> None:
    fake = Path(os.environ["PATH"].split(os.pathsep)[0]) / "git"
    fake.write_text("#!/bin/sh\necho 'git version 99.0'\n")
    fake.chmod(0o755)


MUTATIONS: dict[str, Callable[[Path], None]] = {
    "prompt, same size and mtime": lambda r: _same_size_edit(
        r / "scenarios/demo.yaml", "Do it.", "Do that"[:6]
    ),
    "fixture contents, same size and mtime": lambda r: _same_size_edit(
        r / "scenarios/fixtures/f/file.txt", "one", "two"
    ),
    "fixture file added": lambda r: (r / "scenarios/fixtures/f/new.txt").write_text("x"),
    "fixture file renamed": lambda r: (r / "scenarios/fixtures/f/file.txt").rename(
        r / "scenarios/fixtures/f/file2.txt"  # still before `link`: only the name moves
    ),
    "fixture link pointed elsewhere": lambda r: (
        (r / "scenarios/fixtures/f/link").unlink(),
        (r / "scenarios/fixtures/f/link").symlink_to("elsewhere.txt"),
    ),
    "fixture file made executable": lambda r: (r / "scenarios/fixtures/f/file.txt").chmod(0o755),
    "fixture subfolder added": lambda r: (r / "scenarios/fixtures/f/sub").mkdir(),
    "scenario added": lambda r: (r / "scenarios/other.yaml").write_text(
        SCENARIO.replace("name: demo", "name: other")
    ),
    "scenario removed": lambda r: (r / "scenarios/judged.yaml").unlink(),
    "template override added": lambda r: (
        (r / "templates").mkdir(),
        (r / "templates/evaluation.md.j2").write_text("{{ metrics.outcome }}\n"),
    ),
    "llmtt.toml edited": lambda r: (r / "llmtt.toml").write_text(
        (r / "llmtt.toml").read_text() + "\n[run]\ntimeout_secs = 77\n"
    ),
    "variant file edited": lambda r: (r / "guides/v1.md").write_text("use git well\n"),
    "rubric edited": lambda r: (r / "rubrics/r.yaml").write_text(
        RUBRIC.replace("Does it.", "Does it well.")
    ),
    "another git on PATH": _git_in_front,
    "module the project's evaluator imports, same size and mtime": lambda r: _same_size_edit(
        r / "plancache_helper.py", "one", "two"
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_any_input_change_misses_and_rebuilds(demo: Project, name: str) -> None:
    selection = Selection()
    before, _ = plancache.load(demo.root, selection)
    assert plancache.load(demo.root, selection)[1] is None  # cached
    MUTATIONS[name](demo.root)
    after, built = plancache.load(demo.root, selection)
    assert built is not None, f"{name}: the stale plan was reused"
    assert after == full(demo.root, selection)
    assert after != before, f"{name}: the plan should have changed"


def test_environment_read_by_the_plan_is_part_of_it(
    demo: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    selection = Selection()
    before, _ = plancache.load(demo.root, selection)
    assert plancache.load(demo.root, selection)[1] is None
    monkeypatch.setenv("LLMTT_JUDGE", "judge-b")
    after, built = plancache.load(demo.root, selection)
    assert built is not None
    assert after.runs[2].judge_model == "judge-b" != before.runs[2].judge_model


def test_inputs_changed_just_now_are_not_cached(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/fixtures/f/file.txt", "one\n")
    project.write("scenarios/demo.yaml", SCENARIO)
    assert plancache.load(project.root, Selection())[1] is not None
    assert plancache.load(project.root, Selection())[1] is not None
    assert not plancache.cache_file(project.root, Selection()).exists()  # type: ignore[union-attr]


def test_a_version_command_with_no_binary_to_key_on_is_never_cached(demo: Project) -> None:
    # Its output can change at any time, so it is probed on every load.
    toml = demo.root / "llmtt.toml"
    toml.write_text(toml.read_text().replace('binary = "git"', 'binary = "no-such-tool-xyz"'))
    settle(demo.root)
    assert plancache.load(demo.root, Selection())[1] is not None
    assert plancache.load(demo.root, Selection())[1] is not None


def test_cache_written_by_other_code_or_damaged_is_rebuilt(demo: Project) -> None:
    selection = Selection()
    plancache.load(demo.root, selection)
    where = plancache.cache_file(demo.root, selection)
    assert where is not None
    data = json.loads(where.read_text())
    data["code"][0] = "0.0.0-other"
    where.write_text(json.dumps(data))
    assert plancache.load(demo.root, selection)[1] is not None
    where.write_text('{"format": 1, "code"')
    assert plancache.load(demo.root, selection)[1] is not None
    assert plancache.load(demo.root, selection)[1] is None  # rewritten, whole again


def test_doit_runs_from_the_cache_and_catches_a_stale_one(demo: Project) -> None:
    (demo.root / "scenarios/judged.yaml").unlink()  # no judge model in doit's environment
    settle(demo.root)
    first = demo.doit("run")
    assert first.code == 0, first.out + first.err
    where = plancache.cache_file(demo.root, Selection())
    assert where is not None and where.is_file()
    written = where.stat().st_mtime_ns
    again = demo.doit("run")
    assert again.code == 0 and again.executed() == [], again.out
    assert where.stat().st_mtime_ns == written, "an unchanged project should load from the cache"

    # A cache that disagrees with the project (as a bug would leave it) is caught by the first
    # task that executes, removed, and the next invocation is right again.
    data = json.loads(where.read_text())
    data["plan"]["keys"][data["plan"]["runs"][0][5]["agent"]]["prompt"] = "tampered"
    where.write_text(json.dumps(data))
    stale = demo.doit("run")
    assert stale.code != 0
    assert "the cached plan was out of date" in stale.out + stale.err, stale.out + stale.err
    assert not where.exists()
    # doit keeps a failed task pending: that run is made again, and nothing else.
    fixed = demo.doit("run")
    assert fixed.code == 0, fixed.out + fixed.err
    assert sorted(fixed.executed()) == [
        "aggregate",
        "demo/oracle/r1",
        "demo/oracle/r1:agent",
        "demo/oracle/r1:evaluate",
    ], fixed.out
    assert demo.doit("run").executed() == []


def test_a_cached_task_list_loads_without_the_loaders(demo: Project) -> None:
    (demo.root / "scenarios/judged.yaml").unlink()
    settle(demo.root)
    probe = (
        "import sys, llmtt.tasks as t; list(t.task_llmtt()); "
        "print(sorted({'pydantic', 'yaml', 'llmtt.plan.runs', 'llmtt.spec.project'} & set(sys.modules)))"
    )

    def loaded() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=demo.root, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert loaded() == "['llmtt.plan.runs', 'llmtt.spec.project', 'pydantic', 'yaml']"  # built
    assert loaded() == "[]"  # from the cache


AUDIT = """
import json, os, sys
from pathlib import Path
from llmtt.util import signatures as inputs
from llmtt.plan.runs import build_plan
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

opened = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and isinstance(args[0], (str, os.PathLike)):
        opened.append(os.path.abspath(args[0]))
sys.addaudithook(hook)
with inputs.recording() as noted:
    build_plan(load_project(Path.cwd()), Selection(agents=("oracle", "claude-code"), models=("scripted",)))
root = str(Path.cwd().resolve())
mine = [
    p for p in opened
    if p.startswith(root + os.sep)
    and "/llm-tool-test-results/" not in p  # llmtt's own caches
    and "__editable__" not in p  # the import system looking for modules
    and "__pycache__" not in p  # its compiled copies of the project's own (noted) modules
]
print(json.dumps({"opened": mine, "unnoted": sorted(set(mine) - set(noted.files) - set(noted.links))}))
"""


def test_every_project_file_the_plan_reads_is_noted(demo: Project) -> None:
    # Guards the cache against a new read in the loaders that forgets to note its input.
    demo.write("templates/evaluation.md.j2", "{{ metrics.outcome }}\n")
    demo.write("node_modules/.bin/claude", "#!/bin/sh\necho 2.0.0\n").chmod(0o755)
    proc = subprocess.run(
        [sys.executable, "-c", AUDIT], cwd=demo.root, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert len(seen["opened"]) >= 8, seen  # toml, scenarios, fixture, rubric, variant, template
    assert seen["unnoted"] == []


def test_only_the_newest_plans_are_kept(demo: Project) -> None:
    for repeats in range(1, plancache.KEEP + 3):
        plancache.load(demo.root, Selection(repeats=repeats))
    where = plancache.cache_file(demo.root, Selection(repeats=1))
    assert where is not None
    kept = list(where.parent.glob("*.json"))
    assert len(kept) == plancache.KEEP
    assert not where.exists()  # the oldest went first
    assert plancache.load(demo.root, Selection(repeats=plancache.KEEP + 2))[1] is None


def test_an_unwritable_cache_folder_only_costs_speed(demo: Project) -> None:
    where = plancache.cache_file(demo.root, Selection())
    assert where is not None
    where.parent.parent.mkdir(parents=True)
    where.parent.write_text("a file where the folder should be")
    spec, built = plancache.load(demo.root, Selection())
    assert built is not None and spec == full(demo.root, Selection())
    assert plancache.load(demo.root, Selection())[1] is not None


def test_doit_and_python_m_doit_share_one_cached_plan(demo: Project) -> None:
    """The interpreter is keyed by its real path: `doit`, `python -m doit` and `python3 -m doit`
    of one virtualenv do not invalidate each other's plan."""
    (demo.root / "scenarios/judged.yaml").unlink()
    settle(demo.root)
    assert demo.doit("run").code == 0
    where = plancache.cache_file(demo.root, Selection())
    assert where is not None and where.is_file()
    written = where.stat().st_mtime_ns
    bin_dir = Path(sys.executable).parent
    for python in ("python", "python3"):
        assert (bin_dir / python).exists()
        done = subprocess.run(
            [str(bin_dir / python), "-m", "doit", "run"],
            cwd=demo.root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert where.stat().st_mtime_ns == written, f"{python} -m doit rebuilt the plan"


@pytest.mark.parametrize(
    "selection",
    [Selection(), Selection(scenarios=("judged",)), Selection(variants=("v1",), repeats=2)],
)
def test_one_scenarios_plan_gives_the_runs_the_whole_plan_gives(
    demo: Project, selection: Selection
) -> None:
    """A task carrying out a run loads only its scenario's file: the runs it builds must be
    those of the whole plan, key for key (else every task would stop as stale)."""
    whole = full(demo.root, selection).runs
    assert whole
    for spec in whole:
        part = build_plan(
            load_project(demo.root, only=Path(spec.scenario_file)), selection, part=True
        )
        assert spec in [RunSpec.of(run) for run in part.runs]
        assert len(part.project.scenarios) == 1


WORKER_AUDIT = """
import os, sys
from doit.doit_cmd import DoitMain
from doit.cmd_base import ModuleTaskLoader

opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        opened.add(os.path.basename(str(args[0])))
sys.path.insert(0, os.getcwd())
import dodo  # the task list, from the cache
sys.addaudithook(hook)  # from here on: the task that carries out the run
code = DoitMain(ModuleTaskLoader(dodo)).run(["run", "demo/oracle/r1"])
print(sorted(n for n in opened if n.endswith(".yaml")), code)
"""


def test_a_task_reads_only_the_scenario_of_its_run(demo: Project) -> None:
    """From the cache, carrying out one run reads its own scenario's file and no other: its
    cost and memory do not grow with the project."""
    (demo.root / "scenarios/judged.yaml").unlink()
    demo.write("scenarios/other.yaml", SCENARIO.replace("name: demo", "name: other"))
    settle(demo.root)
    assert demo.doit("list").code == 0  # caches the plan
    done = subprocess.run(
        [sys.executable, "-c", WORKER_AUDIT],
        cwd=demo.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['demo.yaml'] 0", done.stdout
