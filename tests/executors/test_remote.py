"""What a Ray node is sent and what comes back (llmtt/executors/remote.py), without a cluster: the project
archive leaves out what it must, a returned archive cannot write outside its folder, and a
landing cut short leaves the layer pending, never half-written."""

from __future__ import annotations

import io
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import GIT_TOML, DoitResult, Project

from llmtt.errors import LlmttError
from llmtt.executors import remote
from llmtt.executors.remote import RemoteError, land, pack_dir, pack_project, unpack, unpacked


def _names(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers()}


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_project_archive_leaves_out_results_vcs_packages_and_exclusions(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    _tree(
        root,
        {
            "llmtt.toml": "",
            "scenarios/a.yaml": "task: {prompt: x}\n",
            "scenarios/fixtures/a/data.txt": "data",
            "results/a/run.json": "{}",
            ".git/HEAD": "ref",
            "node_modules/x/index.js": "",
            ".venv/bin/python": "",
            "scenarios/__pycache__/m.pyc": "",
            "big/blob.bin": "x",
            "notes/keep.md": "",
        },
    )
    (root / "scenarios" / "fixtures" / "a" / "link").symlink_to("data.txt")
    digest, archive = pack_project(root, root / "results", ["big", "notes/*.md"])
    names = _names(archive)
    assert {"llmtt.toml", "scenarios/a.yaml", "scenarios/fixtures/a/data.txt"} <= names
    assert "scenarios/fixtures/a/link" in names  # a fixture's link travels as a link
    for left_out in ("results", ".git", "node_modules", ".venv", "__pycache__", "big"):
        assert not [n for n in names if left_out in n.split("/")], (left_out, names)
    assert "notes/keep.md" not in names
    # The digest names the content: the same folder packs to the same archive.
    assert pack_project(root, root / "results", ["big", "notes/*.md"])[0] == digest


def test_a_project_too_large_to_send_names_the_file_and_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    _tree(root, {"llmtt.toml": "", "scenarios/fixtures/huge.bin": "x" * 4096})
    monkeypatch.setattr(remote, "PROJECT_LIMIT", 1024)
    with pytest.raises(LlmttError) as caught:
        pack_project(root, root / "results", [])
    assert "scenarios/fixtures/huge.bin" in str(caught.value)
    assert "[executor] exclude" in str(caught.value)


def _archive(entries: list[tarfile.TarInfo]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info in entries:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buffer.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


# Both ways of unpacking: tarfile's extraction filters (Python 3.11.4 on) and llmtt's own checks
# for a Python without them (Debian 12's 3.11.2), whatever Python runs the tests.
FILTERS = pytest.mark.parametrize("filters", [True, False], ids=["tarfile-filters", "own-checks"])


@pytest.mark.parametrize(
    "entries",
    [
        [_file("../outside")],
        [_file("/etc/llmtt-outside")],
        [_link("workspace/out", str(Path("/tmp"))), _file("workspace/out/written-through")],
    ],
    ids=["dot-dot", "absolute", "through-its-own-link"],
)
@FILTERS
def test_a_returned_archive_cannot_write_outside_its_folder(
    tmp_path: Path, entries: list[tarfile.TarInfo], filters: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "_HAS_FILTERS", filters and remote._HAS_FILTERS)
    dest = tmp_path / "dest"
    dest.mkdir()
    # tarfile's own filter refuses some first where Python has it (3.11.4 on), llmtt's after.
    refusals = (RemoteError, getattr(tarfile, "FilterError", RemoteError))
    with pytest.raises(refusals):
        unpack(_archive(entries), dest)
    assert not (tmp_path / "outside").exists()
    assert not Path("/etc/llmtt-outside").exists()
    assert not Path("/tmp/written-through").exists()


@FILTERS
def test_a_returned_file_loses_setuid_and_group_or_other_write(
    tmp_path: Path, filters: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "_HAS_FILTERS", filters and remote._HAS_FILTERS)
    entry = _file("workspace/tool")
    entry.mode = 0o6777
    unpack(_archive([entry]), tmp_path)
    assert stat.S_IMODE((tmp_path / "workspace" / "tool").stat().st_mode) == 0o755


def test_an_agents_own_links_in_the_workspace_land_as_links(tmp_path: Path) -> None:
    src = tmp_path / "run"
    (src / "workspace").mkdir(parents=True)
    (src / "workspace" / "passwd").symlink_to("/etc/passwd")
    (src / "run.json").write_text("{}")
    dest = tmp_path / "landed"
    land(pack_dir(src), dest, first=["run.json"], last="run.json")
    assert os.readlink(dest / "workspace" / "passwd") == "/etc/passwd"


def test_a_landing_cut_short_leaves_the_layer_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "node"
    _tree(src, {"run.json": '{"new": 1}', "events.jsonl": "new\n", "workspace/a.txt": "new"})
    run_dir = tmp_path / "results" / "run"
    _tree(run_dir, {"run.json": '{"old": 1}', "events.jsonl": "old\n", "workspace/a.txt": "old"})
    real = os.replace
    calls = []

    def failing(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> None:
        calls.append(Path(b).name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(a, b)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError):
        land(pack_dir(src), run_dir, first=["run.json"], last="run.json")
    # The old run.json went first: nothing marks the layer done, so it stays pending.
    assert not (run_dir / "run.json").exists()
    assert calls[0] != "run.json"
    assert [p.name for p in run_dir.parent.iterdir()] == ["run"]  # no landing folder left
    monkeypatch.setattr(os, "replace", real)
    assert land(pack_dir(src), run_dir, first=["run.json"], last="run.json") == [
        "events.jsonl",
        "run.json",
        "workspace",
    ]
    assert (run_dir / "run.json").read_text() == '{"new": 1}'
    assert (run_dir / "workspace" / "a.txt").read_text() == "new"


def test_the_controllers_record_of_attempts_lands_whole_with_the_nodes_line_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "results" / "run"
    _tree(run_dir, {"attempts.jsonl": "lost\n", "run.json": "{}"})
    after = {"attempts.jsonl": b"lost\n"}
    node = tmp_path / "node"
    _tree(node, {"attempts.jsonl": "node\n", "run.json": "{}"})
    real = os.replace

    def failing(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> None:
        if Path(b).name == "attempts.jsonl":
            raise OSError(28, "No space left on device")
        real(a, b)

    # Cut short where the record lands: the controller's lines are all still there.
    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError):
        land(pack_dir(node), run_dir, first=["run.json"], last="run.json", after=after)
    assert (run_dir / "attempts.jsonl").read_text() == "lost\n"
    monkeypatch.setattr(os, "replace", real)
    land(pack_dir(node), run_dir, first=["run.json"], last="run.json", after=after)
    assert (run_dir / "attempts.jsonl").read_text() == "lost\nnode\n"
    # A node that sent no record, or a folder in its place, leaves the controller's as it is.
    for sent in ({"run.json": "{}"}, {"run.json": "{}", "attempts.jsonl/x": ""}):
        shutil.rmtree(node)
        _tree(node, sent)
        land(pack_dir(node), run_dir, first=["run.json"], last="run.json", after=after)
        assert (run_dir / "attempts.jsonl").read_text() == "lost\nnode\n"


def test_a_node_unpacks_a_project_once_and_forgets_old_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMTT_REMOTE_DIR", str(tmp_path / "node"))
    root = tmp_path / "proj"
    _tree(root, {"llmtt.toml": "", "scenarios/a.yaml": "x"})
    digest, archive = pack_project(root, root / "results", [])
    old = tmp_path / "node" / "projects" / "0ld"
    old.mkdir(parents=True)
    os.utime(old, (time.time() - 2 * remote.KEPT_BUNDLES_SECS,) * 2)
    first = unpacked(digest, archive)
    assert (first / "scenarios" / "a.yaml").read_text() == "x"
    (first / "marker").write_text("")
    assert unpacked(digest, archive) == first and (first / "marker").exists()
    assert not old.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["executor=cloud"],
            "executor=cloud is not an executor (use executor=local or executor=ray)",
        ),
        (["executor=ray", "-n", "2", "-P", "process"], "leave out -P process"),
        (["executor=ray", "-n", "2", "--parallel-type=process"], "leave out -P process"),
        # Runs in threads of one process would reap and stop each other's processes.
        (["-n", "2", "-P", "thread"], "leave out -P thread"),
        (["-n", "2", "-Pthread"], "leave out -P thread"),
    ],
)
def test_an_executor_mistake_is_one_line_before_anything_runs(
    project: Project, args: list[str], said: str
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    done = project.doit("run", *args)
    assert done.code == 2, done.out + done.err
    assert done.err.strip().splitlines() == [f"llmtt: {done.err.strip()[7:]}"]
    assert said in done.err
    assert not (project.results() / "a").exists()


def test_no_cluster_at_the_address_is_one_line_at_once(project: Project) -> None:
    with socket.socket() as probe:  # a port on 127.0.0.1 that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    project.write("llmtt.toml", GIT_TOML + f'\n[executor]\naddress = "127.0.0.1:{port}"\n')
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    started = time.monotonic()
    done = project.doit("run", "executor=ray", timeout=60)
    assert done.code == 1 and time.monotonic() - started < 30, done.out + done.err
    (line,) = [x for x in done.err.splitlines() if x.startswith("llmtt:")]
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in line and "ray start --head" in line
    assert not (project.results() / "a" / "oracle" / "r1" / "run.json").exists()


PROBE = """\
import sys
from doit.doit_cmd import DoitMain
from llmtt.taskgraph.loader import LlmttLoader


class Probe(LlmttLoader):
    def load_tasks(self, cmd, pos_args):
        tasks = super().load_tasks(cmd, pos_args)
        for task in tasks:
            print("capture", task.name, task.io.capture)
        return tasks


sys.exit(DoitMain(Probe()).run(sys.argv[1:]))
"""


@pytest.mark.parametrize(("args", "captured"), [([], True), (["executor=ray"], False)])
def test_under_ray_no_task_has_doit_capture_its_output(
    project: Project, args: list[str], captured: bool
) -> None:
    """With Ray, doit runs the actions in threads; its capture swaps sys.stdout for an object
    per task, and a print in one thread then wrote into another's as it was freed (an
    AttributeError on doit's Writer, or a segmentation fault)."""
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    project.write("probe.py", PROBE)
    proc = subprocess.run(
        [sys.executable, "probe.py", "list", *args],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    done = DoitResult(proc.returncode, proc.stdout, proc.stderr)
    assert done.code == 0, done.out + done.err
    seen = [line.split() for line in done.out.splitlines() if line.startswith("capture ")]
    assert {name for _, name, _ in seen} >= {"a/oracle/r1:agent", "a/oracle/r1", "aggregate"}
    assert {flag for _, _, flag in seen} == {str(captured)}


def test_runs_put_in_threads_by_doit_config_are_refused_not_carried_out(
    project: Project,
) -> None:
    """doit told to use threads without -P (its config in dodo.py): no run is carried out
    in a thread, where runs would reap and stop each other's processes."""
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    project.write(
        "dodo.py", 'from llmtt.tasks import *  # noqa: F403\nDOIT_CONFIG["par_type"] = "thread"\n'
    )
    done = project.doit("run", "-n", "2")
    assert done.code != 0
    assert "set doit's parallel type to process" in done.out + done.err
    assert not (project.results() / "a" / "oracle" / "r1" / "run.json").exists()


def test_a_node_is_given_the_variables_the_targets_env_names(project: Project) -> None:
    """A target's `${NAME}` is expanded where the layer runs: a Ray node gets the controller's
    value of each variable a target names, as it gets the model keys."""
    from llmtt.spec.project import load_project

    project.write(
        "llmtt.toml",
        GIT_TOML + '[models.m]\napi_key_env = "M_KEY"\n[targets.t]\nbinary = "t"\n'
        'env = { A = "${FROM_TABLE}" }\n',
    )
    project.write(
        "scenarios/s.yaml", "task: {prompt: x}\ntarget: {env: {B: '${env:FROM_SCENARIO}/x'}}\n"
    )
    names = remote.key_names(load_project(project.root))
    assert {"M_KEY", "FROM_TABLE", "FROM_SCENARIO"} <= set(names)
