"""A hostile run: its commands try every way out the issue's probes found (the user's keys and
files, the harness's environment, the project, other runs, the record of its own grade, the
harness's processes, the network). Under the default sandbox every probe fails and nothing
outside the run changes; with the sandbox switched off the same probes get through, which
proves each probe would notice a way out."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import llmtt
from tests.conftest import BIN, Project, cli_project

CANARY = "sk-cnry5f3aZq81"


class _Service(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"service-reached")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def service() -> Iterator[int]:
    """A service on the host's loopback that no run should reach."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def _probes(root: Path, home: Path, port: int, *, destructive: bool) -> dict[str, str]:
    """name -> a command that prints PROBE-<name>-REACHED only when it got through."""
    results = root / "llm-tool-test-results"
    victim = results / "victim" / "oracle" / "r1"
    me = results / "probe" / "oracle" / "r1"
    venv = Path(sys.prefix)
    q = shlex.quote
    reads = {
        "ssh-key": f"grep -q ssh-secret {q(str(home / '.ssh/id_ed25519'))}",
        "aws": f"grep -q aws-secret {q(str(home / '.aws/credentials'))}",
        "config": f"grep -q target {q(str(root / 'llmtt.toml'))}",
        "dotenv": f"grep -q dotenv-secret {q(str(root / '.env'))}",
        "own-scenario": f"grep -q PROBE {q(str(root / 'scenarios/probe.yaml'))}",
        "other-workspace": f"grep -q victim {q(str(victim / 'workspace/victim.txt'))}",
        "other-transcript": f"grep -q victim {q(str(victim / 'transcript.raw.txt'))}",
        "results-db": f"grep -q SQLite {q(str(results / 'results.db'))}",
        "llmtt-code": f"grep -q __version__ {q(str(Path(llmtt.__file__)))}",
        "harness-env": f"cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -q {CANARY}",
        "parent-env": f"tr '\\0' '\\n' < /proc/$PPID/environ | grep -q {CANARY}",
        "harness-process": "ps -eo args | grep -q '[d]oit'",
        "network": "python3 -c \"import urllib.request as u; assert b'reached' in "
        f"u.urlopen('http://127.0.0.1:{port}/', timeout=3).read()\"",
    }
    # Whether a write got through is seen from outside: inside, a path that is not shown may
    # still be written (into the sandbox's own /tmp or memory), and nothing else sees it.
    writes = [
        f"echo planted >> {q(str(home / '.bashrc'))}",
        f"touch {q(str(venv / 'planted-by-agent'))}",
        f'sed -i \'s/"exit_code": 1/"exit_code": 0/\' {q(str(me / "events.jsonl.part"))}',
        f"printf 'echo {{\"passed\": true}}\\n' > {q(str(root / 'gate.sh'))}",
        f'sed -i \'s/"fail"/"pass"/g\' {q(str(victim / "result.json"))}',
        f"cp {q(str(root / 'scenarios/victim.yaml'))} {q(str(root / 'scenarios/planted.yaml'))}",
        f'echo \'open("/tmp/dodo-ran", "w")\' >> {q(str(root / "dodo.py"))}',
    ]
    if destructive:  # only where the harness cannot be seen: unconfined it would kill it
        writes.append("pkill -9 -f doit; kill -9 -1")
    probes = {
        n: f"( {c} ) >/dev/null 2>&1 && echo PROBE-{n}-REACHED; true" for n, c in reads.items()
    }
    return {
        **probes,
        **{f"write-{i}": f"( {c} ) >/dev/null 2>&1; true" for i, c in enumerate(writes)},
    }


def _read_probes(probes: dict[str, str]) -> set[str]:
    return {n for n in probes if not n.startswith("write-")}


def _hostile_project(
    root: Path, home: Path, port: int, *, agent_toml: str, destructive: bool
) -> Project:
    project = cli_project(root, agent_toml) if agent_toml else Project(root)
    if not agent_toml:
        from tests.conftest import GIT_TOML

        project.write("llmtt.toml", GIT_TOML)
    project.write(".env", "API_TOKEN=dotenv-secret\n")
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh/id_ed25519").write_text("ssh-secret\n")
    (home / ".aws").mkdir()
    (home / ".aws/credentials").write_text("aws_secret_access_key = aws-secret\n")
    (home / ".bashrc").write_text("# the user's\n")
    gate = project.write("gate.sh", "echo '{\"passed\": false}'\n")
    gate.chmod(0o755)
    project.write(
        "scenarios/victim.yaml",
        """\
        task: {prompt: leave a file}
        solution: ["echo victim > victim.txt"]
        evaluation:
          gates:
            - {type: file_exists, path: missing.txt}
        """,
    )
    probes = _probes(root, home, port, destructive=destructive)
    project.write(
        "scenarios/probe.yaml",
        json.dumps(
            {
                "task": {"prompt": "PROBE every way out"},
                "solution": ["git frobnicate", *probes.values()],
                "evaluation": {
                    "gates": [
                        {"type": "script", "path": "../gate.sh"},
                        {"type": "no_transcript_errors"},
                    ]
                },
            }
        ),
    )
    return project


def _run_hostile(
    tmp_path: Path,
    service: int,
    env: dict[str, str],
    destructive: bool,
    agent_toml: str = "",
    agent: str = "oracle",
) -> tuple[Project, Path, str, dict[str, str]]:
    home = tmp_path / "user-home"
    project = _hostile_project(
        tmp_path / "p", home, service, agent_toml=agent_toml, destructive=destructive
    )
    before = {rel: (project.root / rel).read_text() for rel in ("dodo.py", "gate.sh", "llmtt.toml")}
    env = {**env, "HOME": str(home), "OPENAI_API_KEY": CANARY, "LLMTT_PROBE": CANARY}
    first = project.doit("run", "scenario=victim", "agent=oracle", env=env)
    assert "FAIL - gate 1" in first.out, first.out + first.err  # the victim fails, as it should
    second = project.doit(
        "run",
        "scenario=probe",
        f"agent={agent}",
        *(["model=scripted"] if agent != "oracle" else []),
        env=env,
        timeout=120,
    )
    assert "Traceback" not in second.err, second.err
    who = "oracle" if agent == "oracle" else f"{agent}-scripted"
    events = (project.results() / "probe" / who / "r1" / "events.jsonl").read_text()
    return project, home, events, before


def _reached(events: str) -> set[str]:
    """The probes whose command said it got through (in what the commands printed)."""
    outputs = [json.loads(line) for line in events.splitlines()]
    printed = "\n".join(e.get("output") or "" for e in outputs if e["event"] == "tool_result")
    return set(re.findall(r"PROBE-([\w-]+)-REACHED", printed))


def test_every_probe_fails_in_the_sandbox_and_nothing_outside_changes(
    tmp_path: Path, service: int
) -> None:
    project, home, events, before = _run_hostile(tmp_path, service, {}, destructive=True)
    assert "PROBE-" in events  # the probes ran
    assert _reached(events) == set()
    for rel, text in before.items():
        assert (project.root / rel).read_text() == text, rel
    assert not (project.root / "scenarios/planted.yaml").exists()
    assert (home / ".bashrc").read_text() == "# the user's\n"
    assert not (Path(sys.prefix) / "planted-by-agent").exists()
    victim = project.json("victim/oracle/r1/result.json")
    assert victim["outcome"] == "fail"
    probe = project.json("probe/oracle/r1/result.json")
    assert probe["outcome"] == "fail"  # its gate script and its failed command still count
    gates = project.json("probe/oracle/r1/gates.json")["gates"]
    assert [g["passed"] for g in gates] == [False, False]
    assert project.json("probe/oracle/r1/run.json")["isolation"]["mode"] == "bwrap"
    assert "Unconfined" not in (project.results() / "report.md").read_text()
    listed = project.doit("list", env={"HOME": str(home)})
    assert "planted" not in listed.out and listed.code == 0


def test_the_same_probes_get_through_unconfined(tmp_path: Path, service: int) -> None:
    project, home, events, _ = _run_hostile(
        tmp_path, service, {"LLMTT_ISOLATION": "none"}, destructive=False
    )
    try:
        probes = _probes(tmp_path / "p", home, service, destructive=False)
        assert _reached(events) == _read_probes(probes)
        assert (home / ".bashrc").read_text() != "# the user's\n"
        assert (Path(sys.prefix) / "planted-by-agent").exists()
        assert (project.root / "scenarios/planted.yaml").exists()
        assert "dodo-ran" in (project.root / "dodo.py").read_text()
        assert project.json("victim/oracle/r1/result.json")["outcome"] == "pass"  # forged
        probe = project.json("probe/oracle/r1/result.json")
        assert probe["outcome"] == "pass"  # forged: its gate script and its event log
        assert project.json("probe/oracle/r1/run.json")["isolation"] == {"mode": "none"}
        assert (
            "**Unconfined: 1 of the evaluated runs" in (project.results() / "report.md").read_text()
        )
        checked = subprocess.run(
            [str(BIN / "llmtt"), "check"], cwd=project.root, capture_output=True, text=True
        )
        assert "Unconfined: 1 of the evaluated runs" in checked.stdout, checked.stdout
    finally:
        (Path(sys.prefix) / "planted-by-agent").unlink(missing_ok=True)


def test_a_real_agent_cli_on_the_scripted_model_is_confined_too(
    tmp_path: Path, service: int
) -> None:
    project, home, events, before = _run_hostile(
        tmp_path, service, {}, destructive=True, agent_toml="\n", agent="claude-code"
    )
    assert events.count("PROBE-") >= 5  # its tool calls ran the probes
    assert _reached(events) == set()
    for rel, text in before.items():
        assert (project.root / rel).read_text() == text, rel
    assert not (project.root / "scenarios/planted.yaml").exists()


def test_a_scenario_sees_its_workspace_at_the_paths_its_task_names(tmp_path: Path) -> None:
    project = Project(tmp_path)
    from tests.conftest import GIT_TOML

    project.write("llmtt.toml", GIT_TOML)
    project.write("fixture/data/in.csv", "a,b\n1,2\n")
    project.write(
        "scenarios/paths.yaml",
        """\
        task: {prompt: "Convert /data/in.csv and write /home/eval/out.txt"}
        fixture: ../fixture
        mounts: {"/data": data, "/home/eval": ".", "/tmp": scratch}
        setup:
          commands: ["test -f /data/in.csv"]
        solution:
          - "pwd > where.txt && wc -l < /data/in.csv > /home/eval/out.txt && echo t > /tmp/t.txt"
        evaluation:
          gates:
            - {type: file_contains, path: out.txt, substring: "2"}
            - {type: file_contains, path: where.txt, substring: /home/eval}
            - {type: file_exists, path: scratch/t.txt}
            - {type: command_succeeds, command: "grep -q 2 /home/eval/out.txt && test -f /data/in.csv"}
        """,
    )
    result = project.doit("run")
    assert result.code == 0, result.out + result.err
    record = project.json("paths/oracle/r1/result.json")
    assert record["outcome"] == "pass", record["outcome_reason"]
    assert not Path("/data/in.csv").exists() and not Path("/home/eval/out.txt").exists()
    unconfined = project.doit("run", "-a", env={"LLMTT_ISOLATION": "none"})
    assert unconfined.code == 1, unconfined.out + unconfined.err  # not carried out
    error = project.json("paths/oracle/r1/run.json")["error"]
    assert "mounts" in error and "sandbox" in error


def test_each_phase_reaches_only_what_its_policy_allows(tmp_path: Path, service: int) -> None:
    from tests.conftest import GIT_TOML

    project = Project(tmp_path)
    fetch = (
        'python3 -c "import urllib.request as u; '
        f"assert b'reached' in u.urlopen('http://127.0.0.1:{service}/', timeout=3).read()\""
    )
    project.write(
        "scenarios/net.yaml",
        json.dumps(
            {
                "task": {"prompt": "fetch"},
                "setup": {"commands": [fetch]},
                "solution": [f"{fetch} && echo agent-reached"],
                "evaluation": {"gates": [{"type": "command_succeeds", "command": fetch}]},
            }
        ),
    )
    project.write("llmtt.toml", GIT_TOML)
    closed = project.doit("run")
    assert "setup command" in project.json("net/oracle/r1/run.json")["error"], closed.out
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'[isolation.network]\nsetup = ["127.0.0.1:{service}"]\nchecks = ["http://127.0.0.1:{service}"]\n',
    )
    opened = project.doit("run")
    assert opened.code == 0, opened.out + opened.err
    events = (project.results() / "net/oracle/r1/events.jsonl").read_text()
    assert "agent-reached" not in events.replace('echo agent-reached"', "")  # the agent: none
    record = project.json("net/oracle/r1/result.json")
    assert record["gates"][0]["passed"], record["outcome_reason"]
    project.write("llmtt.toml", GIT_TOML + '[isolation.network]\nsetup = ["10.1.2.3:80"]\n')
    unroutable = project.doit("run", "-a")
    assert "10.1.2.3" in project.json("net/oracle/r1/run.json")["error"], unroutable.out


def test_doit_run_refuses_in_one_line_where_no_sandbox_can_be_made(tmp_path: Path) -> None:
    from tests.conftest import GIT_TOML

    project = Project(tmp_path)
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [echo hi]\n")
    refused = project.doit("run", env={"LLMTT_BWRAP": str(tmp_path / "no-bwrap")})
    assert refused.code == 2
    assert refused.err.count("\n") == 1 and "LLMTT_BWRAP=" in refused.err, refused.err
    assert not (project.results() / "a").exists()


def test_a_link_planted_where_a_mount_was_leads_nowhere(tmp_path: Path) -> None:
    """The agent replaces the folder a mount shows by a link to a folder outside; the next
    command, and the gates after the agent, see an empty folder there, not where it leads."""
    from tests.conftest import GIT_TOML

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("planted-secret-7f3\n")
    project = Project(tmp_path / "p")
    project.write("llmtt.toml", GIT_TOML)
    project.write("fixture/data/in.txt", "x\n")
    probe = "cat /data/secret.txt; echo escaped > /data/escaped.txt; ls /data"
    project.write(
        "scenarios/link.yaml",
        json.dumps(
            {
                "task": {"prompt": "x"},
                "fixture": "../fixture",
                "mounts": {"/data": "data"},
                "solution": [f"rm -rf data; ln -s {outside} data; ls -l", probe],
                "evaluation": {
                    "gates": [
                        {"type": "command_succeeds", "command": "test -f /data/secret.txt"},
                        {"type": "command_succeeds", "command": "echo gate > /data/gate.txt"},
                    ]
                },
            }
        ),
    )
    result = project.doit("run")
    assert "Traceback" not in result.err, result.err
    events = (project.results() / "link/oracle/r1/events.jsonl").read_text()
    assert "planted-secret-7f3" not in events
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # nothing written there
    gates = project.json("link/oracle/r1/gates.json")["gates"]
    assert gates[0]["passed"] is False


def test_a_project_inside_a_shown_folder_stays_unseen(tmp_path: Path) -> None:
    from tests.conftest import GIT_TOML

    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "note.txt").write_text("a shown file\n")
    project = Project(tmp_path / "p")
    project.write("llmtt.toml", GIT_TOML + f'[isolation]\nread_only = ["{tmp_path}"]\n')
    project.write("secret.env", "project-secret-9c1\n")
    project.write(
        "scenarios/under.yaml",
        json.dumps(
            {
                "task": {"prompt": "x"},
                "solution": [
                    f"cat {tmp_path}/tools/note.txt",
                    f"cat {project.root}/secret.env {project.root}/llmtt.toml",
                    f"ls {project.results()}",
                ],
            }
        ),
    )
    result = project.doit("run")
    assert result.code == 0, result.out + result.err
    events = (project.results() / "under/oracle/r1/events.jsonl").read_text()
    assert "a shown file" in events  # the folder is shown
    assert "project-secret-9c1" not in events and "[isolation]" not in events
    assert "report" not in events  # no other file of the results folder
    project.write(
        "scenarios/under.yaml",
        json.dumps(
            {
                "task": {"prompt": "x"},
                "mounts": {str(tmp_path): "here"},
                "solution": ["true"],
            }
        ),
    )
    covered = project.doit("run")
    assert covered.code == 1
    assert "would hide" in project.json("under/oracle/r1/run.json")["error"]


def test_a_read_only_folder_gone_since_the_last_sandbox_is_named(tmp_path: Path) -> None:
    """A project's sandbox is worked out once per process (`isolation._sandbox`), but the
    user's `[isolation]` folders are looked at every time: one deleted meanwhile is named."""
    from llmtt.execution import isolation
    from llmtt.spec.config import load_config

    extra = tmp_path / "extra"
    extra.mkdir()
    (tmp_path / "llmtt.toml").write_text(
        '[target]\nbinary = "sleep"\n\n[isolation]\nread_only = ["extra"]\n'
    )
    config, _ = load_config(tmp_path)
    results = tmp_path / "results"
    box = isolation.sandbox(tmp_path, results, config)
    assert box is not None and extra.resolve() in box.read_only
    assert isolation.sandbox(tmp_path, results, config) is box  # worked out once
    extra.rmdir()
    with pytest.raises(isolation.IsolationError, match="'extra', which does not exist"):
        isolation.sandbox(tmp_path, results, config)
