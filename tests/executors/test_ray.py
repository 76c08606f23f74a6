"""`doit run executor=ray` on a real two-node Ray cluster on this machine (tests/executors/ray_cluster.py):
the same results as a local run, nothing executed a second time, a lost node's run sent once
more and nothing finished lost, a node that plans differently refused in one line."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DOIT, GIT_TOML, Project
from ray_cluster import RayCluster
from test_example_suite import example_copy

ROOT = Path(__file__).resolve().parents[2]
# On the second node only, `llmtt-probe-tool --version` answers otherwise than on the head and
# the controller: a project whose target is that tool is planned differently there.
TOOL = "#!/bin/sh\necho 'llmtt-probe-tool {}'\n"


def _tool(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True)
    path = folder / "llmtt-probe-tool"
    path.write_text(TOOL.format(version))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    tools = tmp_path_factory.mktemp("tools")
    here, there = _tool(tools / "head", "1.0"), _tool(tools / "node", "2.0")
    path = f"{ROOT / 'node_modules' / '.bin'}:{os.environ['PATH']}"
    started = RayCluster(head_env={"PATH": f"{here}:{path}"}, node_env={"PATH": f"{there}:{path}"})
    started.controller_path = f"{here}:{path}"
    try:
        yield started
    finally:
        started.stop()


def ray_doit(cluster: RayCluster, project: Project, *args: str, **env: str) -> Any:
    return cluster.run(
        [DOIT, "run", "executor=ray", *args], cwd=project.root, PATH=cluster.controller_path, **env
    )


def _copy(where: Path) -> Path:
    where.mkdir(parents=True)
    return example_copy(where)


def _executed(out: str) -> list[str]:
    return [line[3:].strip() for line in out.splitlines() if line.startswith(".  ")]


# What differs between any two carryings-out of a run, local or not: times, ids, and what a
# gate printed (a git commit's hash holds its time).
VOLATILE = (
    "stdout",
    "stderr",
    "duration",
    "_secs",
    "_at",
    "timestamp",
    "attempt_id",
    "evaluation_id",
    "executed_on",
    "invocation",
)


def _steady(value: Any) -> Any:
    """A record without what differs between two carryings-out of the same run (times, ids)."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if not any(m in k for m in VOLATILE)}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def _diff(a: Any, b: Any, at: str = "") -> list[str]:
    """The leaves where two records differ, by path."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{at}[{i}]")
        ]
    return [] if a == b else [f"{at}: {a!r} != {b!r}"]


def _runs(project: Project) -> dict[str, dict[str, Any]]:
    report = project.json("report.json")
    out = {}
    for run in report["runs"]:
        rid = run["run_id"]
        out[rid] = {
            name: _steady(project.json(f"{rid}/{name}"))
            for name in ("metrics.json", "gates.json", "result.json")
        } | {"key": project.json(f"{rid}/run.json")["key"], "outcome": run["outcome"]}
    return out


def test_example_suite_on_ray_matches_a_local_run(cluster: RayCluster, tmp_path: Path) -> None:
    local = Project(_copy(tmp_path / "local"))
    on_ray = Project(_copy(tmp_path / "ray"))
    done = local.doit("run", "-n", "2")
    assert done.code == 0, done.out + done.err
    done = ray_doit(cluster, on_ray)
    assert done.returncode == 0, done.stdout + done.stderr
    # Every run's agent layer was carried out by a Ray node, not by the controller.
    where = {rid: on_ray.json(f"{rid}/run.json").get("executed_on") for rid in _runs(on_ray)}
    assert where and all(str(w).startswith("ray:") for w in where.values()), where
    assert _runs(on_ray) == _runs(local), _diff(_runs(on_ray), _runs(local))
    # Same keys: neither a second Ray run nor a local one finds anything to do.
    again = ray_doit(cluster, on_ray)
    assert again.returncode == 0 and _executed(again.stdout) == [], again.stdout + again.stderr
    assert on_ray.doit("run").executed() == []
    # The controller's store holds each run once, as a local run's does.
    lines = (on_ray.results() / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["run_id"] for x in lines) == sorted(_runs(local))


def test_a_node_that_plans_otherwise_is_refused_in_one_line(
    cluster: RayCluster, tmp_path: Path
) -> None:
    project = Project(tmp_path / "probe")
    project.write(
        "llmtt.toml",
        '[target]\nbinary = "llmtt-probe-tool"\nversion_command = "llmtt-probe-tool --version"\n',
    )
    project.write(
        "scenarios/one.yaml",
        """\
        name: one
        task:
          prompt: say hello
        solution:
          - echo hello
        evaluation:
          gates:
            - type: command_succeeds
              command: "true"
        """,
    )
    done = ray_doit(cluster, project)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "llmtt" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    assert "cannot carry out this plan" in lines[0], lines
    assert (
        "'llmtt-probe-tool 2.0' on this node, 'llmtt-probe-tool 1.0' on the controller"
        in (lines[0])
    )
    # Nothing was landed: the run stays pending, as if never tried.
    assert not (project.results() / "one" / "oracle" / "r1" / "run.json").exists()


def test_a_real_agent_cli_on_the_scripted_model_matches_local(
    cluster: RayCluster, tmp_path: Path
) -> None:
    found = []
    words = ("agent=opencode", "model=scripted", "scenario=git-first-commit")
    for name in ("local", "ray"):
        copy = _copy(tmp_path / name)
        # The controller finds the pinned CLI in the project's node_modules; the nodes, which
        # are not sent node_modules, on their PATH (as the README says to install them).
        (copy / "node_modules").symlink_to(ROOT / "node_modules")
        project = Project(copy)
        if name == "local":
            done = project.doit("run", *words)
            assert done.code == 0, done.out + done.err
        else:
            ran = ray_doit(cluster, project, *words)
            assert ran.returncode == 0, ran.stdout + ran.stderr
        found.append(_runs(project))
    assert found[0] == found[1], _diff(found[0], found[1])
    (run,) = found[1].values()
    assert run["outcome"] == "pass"


def test_runs_of_a_model_keep_within_its_limit_in_flight(
    cluster: RayCluster, tmp_path: Path
) -> None:
    project = Project(tmp_path / "limited")
    project.write(
        "llmtt.toml",
        '[target]\nbinary = "sleep"\n\n[matrix]\nagents = ["litellm"]\nmodels = ["scripted"]\n'
        "repeats = 4\n\n[executor]\nmax_in_flight_per_model = { scripted = 1 }\n",
    )
    project.write("scenarios/wait.yaml", "task: {prompt: Wait.}\nsolution: [sleep 1]\n")
    done = ray_doit(cluster, project, "-n", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    spans = []
    for events in project.results().glob("wait/litellm-scripted/r*/events.jsonl"):
        stamps = [json.loads(line)["ts"] for line in events.read_text().splitlines()]
        spans.append((min(stamps), max(stamps)))
    assert len(spans) == 4
    spans.sort()
    # One run of the model at a time: each starts after the one before it ended.
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


PAID_TOML = """\
[target]
binary = "echo"

[models.paid]
litellm = "openai/paid"
api_base = "{url}/v1"
api_key_env = "PAID_KEY"
input_usd_per_mtok = 1.0
output_usd_per_mtok = 10.0

[matrix]
agents = ["litellm"]
models = ["paid"]
repeats = 4

[budget]
max_usd = {budget}
"""

# A paid provider stood in for at the wire, inside the cluster's network namespace: 21 turns,
# about $0.046 a run.
PROVIDER = (
    "import time; from llmtt.scripted.server import ScriptedServer\n"
    "s = ScriptedServer([f'sleep 0.2; echo {i}' for i in range(20)]).start()\n"
    "print(s.url, flush=True); time.sleep(600)\n"
)


def _paid_project(root: Path, url: str, budget: float) -> Project:
    project = Project(root)
    project.write("llmtt.toml", PAID_TOML.format(url=url, budget=budget))
    scenario = "task: {prompt: Count.}\nrun: {max_turns: 30}\n"
    project.write("scenarios/capped.yaml", scenario + "cost: {max_usd: 0.02}\n")
    project.write("scenarios/uncapped.yaml", scenario)
    return project


def _spent(project: Project) -> tuple[float, float]:
    """What the runs' usage events add up to, and the dearest single request."""
    spent = dearest = 0.0
    for events in project.results().glob("*/litellm-paid/r*/events.jsonl"):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "usage":
                spent += event["cost_usd"]
                dearest = max(dearest, event["cost_usd"])
    return spent, dearest


def test_paid_runs_on_ray_keep_to_the_budget_held_on_the_controller(
    cluster: RayCluster, tmp_path: Path
) -> None:
    provider = cluster.popen([sys.executable, "-c", PROVIDER], cwd=tmp_path)
    try:
        assert provider.stdout is not None
        url = provider.stdout.readline().strip()
        limit = 0.1
        project = _paid_project(tmp_path / "paid", url, limit)
        # The nodes have LLMTT_ENABLED=1 of their own: only the controller's switch counts.
        refused = ray_doit(cluster, project, "-n", "4", PAID_KEY="k")
        assert refused.returncode != 0
        assert _spent(project) == (0.0, 0.0)
        record = project.json("capped/litellm-paid/r1/run.json")
        assert "set LLMTT_ENABLED=1" in record["error"], record
        done = ray_doit(cluster, project, "-n", "4", PAID_KEY="k", LLMTT_ENABLED="1")
        spent, dearest = _spent(project)
        # As on one machine: the total passes the budget by at most one turn of each run under
        # way, or a capped run's own limit; some runs are refused and stay pending.
        assert 0 < spent <= limit + max(0.02, 4 * dearest), (spent, done.stdout + done.stderr)
        assert "budget exhausted" in done.stdout + done.stderr
        assert done.returncode != 0
    finally:
        provider.kill()
        provider.wait()


def _slow_project(root: Path, runs: int, secs: float) -> Project:
    project = Project(root)
    project.write("llmtt.toml", GIT_TOML + f"[matrix]\nrepeats = {runs}\n")
    project.write(
        "scenarios/slow.yaml",
        f"""\
        name: slow
        task:
          prompt: make a repository
        solution:
          - sleep {secs}
          - git init -q
        evaluation:
          gates:
            - type: file_exists
              path: .git/HEAD
        """,
    )
    return project


def _sleeps(cluster: RayCluster) -> set[int]:
    """The solution commands under way on the cluster's nodes."""
    pids = cluster.node_pids(0) | cluster.node_pids(1)
    return {pid for pid in pids if _cmdline(pid).startswith(b"sleep")}


def test_a_controller_stopped_mid_run_leaves_nothing_running_on_the_nodes(
    cluster: RayCluster, tmp_path: Path
) -> None:
    project = _slow_project(tmp_path / "stopped", runs=6, secs=30)
    started = cluster.popen(
        [DOIT, "run", "executor=ray", "-n", "4"], cwd=project.root, PATH=cluster.controller_path
    )
    deadline = time.time() + 120
    while len(_sleeps(cluster)) < 2:
        assert time.time() < deadline and started.poll() is None, started.communicate()
        time.sleep(0.05)
    started.send_signal(signal.SIGTERM)
    out, err = started.communicate(timeout=60)
    assert started.returncode != 0
    assert "terminated (SIGTERM)" in err, out + err
    # Ray ends the stopped controller's tasks; each node's watchdog, what they started.
    deadline = time.time() + 30
    while _sleeps(cluster):
        assert time.time() < deadline, [_cmdline(p) for p in _sleeps(cluster)]
        time.sleep(0.2)
    # Nothing was landed half-way: no run is marked done, none has a landing folder left.
    assert not list(project.results().rglob("run.json"))
    assert not list(project.results().rglob(".*landing*"))


def test_a_node_lost_mid_run_loses_no_finished_run(cluster: RayCluster, tmp_path: Path) -> None:
    project = _slow_project(tmp_path / "slow", runs=8, secs=2)
    node = 1  # the second node (the controller's driver is attached to the head)
    started = cluster.popen(
        [DOIT, "run", "executor=ray", "-n", "4"], cwd=project.root, PATH=cluster.controller_path
    )
    # Kill the second node once one of its runs is under way (its `sleep`).
    deadline = time.time() + 120
    while not any(b"sleep" in _cmdline(pid) for pid in cluster.node_pids(node)):
        assert time.time() < deadline and started.poll() is None, started.communicate()
        time.sleep(0.05)
    finished_before = {
        p.parent.relative_to(project.results()).as_posix(): p.read_bytes()
        for p in project.results().rglob("run.json")
    }
    cluster.kill_node(node)
    out, err = started.communicate(timeout=300)
    assert started.returncode == 0, out + err
    report = project.json("report.json")
    assert [r["outcome"] for r in report["runs"]] == ["pass"] * 8, report["runs"]
    lost = {}
    for run in report["runs"]:
        record = project.json(f"{run['run_id']}/run.json")
        lost[run["run_id"]] = record.get("lost_attempts", [])
    retried = [rid for rid, attempts in lost.items() if attempts]
    assert retried, (lost, out, err)  # the killed node had at least one run under way
    assert all(len(a) == 1 and "Error" in a[0]["error"] for a in lost.values() if a), lost
    # Each lost attempt is in the run's record of attempts, before the node's own line, so
    # that a paid run's reports count it (the oracle's cost nothing: its rows count none).
    for rid in retried:
        lines = (project.results() / rid / "attempts.jsonl").read_text().splitlines()
        attempts = [json.loads(line) for line in lines]
        assert [a.get("lost", False) for a in attempts] == [True, False], attempts
        assert "lost by the Ray cluster" in attempts[0]["error"], attempts
    assert not any("attempts_cost_usd" in r for r in report["runs"]), report["runs"]
    assert "sent once more" in out
    # What had finished before the kill is as it was: not carried out again.
    for rid, before in finished_before.items():
        assert (project.results() / rid / "run.json").read_bytes() == before, rid
    assert not set(finished_before) & set(retried)
    again = ray_doit(cluster, project)
    assert again.returncode == 0 and _executed(again.stdout) == [], again.stdout + again.stderr


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
