"""Secrets never reach a human-readable artifact: five secrets planted in a copy of the example
project (process environment, [target] env, [agents.X] env, a key a solution echoes, one seen
only cut short) are in no file a run leaves but the raw transcript, nor on the console; the
transcript is private to its owner and the reports follow the umask."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import FakeProvider, Project, chat_answer
from test_example_suite import example_copy

from llmtt.redaction import MASK

FROM_PROCESS = "mk7Qp2Zr9Lx4Wv8Tn3Bc6Hd1"  # MY_API_KEY, also in a fixture file the agent reads
FROM_TARGET = "dt5Rw8Kq2Nz7Xm4Pv9Lc3Sj6"  # [target] env DEPLOY_TOKEN
FROM_AGENT = "as3Vb7Mn1Qw5Er9Ty2Ui8Op4"  # [agents.oracle] env AGENT_SECRET
KEY_SHAPED = "ghp_R4nd0mK3yTh4tL00ksR3alAbCdEf123456"  # known to no variable
TRUNCATED = "sp8Hg4Jk6Lz2Xc9Vb5Nm1Qa7Ws3"  # [targets.git] env, only ever printed cut
SECRETS = {
    "process env": FROM_PROCESS,
    "[target] env": FROM_TARGET,
    "[agents.oracle] env": FROM_AGENT,
    "key shape": KEY_SHAPED,
    "truncated": TRUNCATED,
}

LEAKY = f"""\
description: Shows secrets everywhere a run can show text.
tags: [secrets]
target: git
task:
  prompt: Commit config.env and push it.
fixture: fixtures/leaky
solution:
  - git init -q .
  - cat config.env
  - echo "deploying with $DEPLOY_TOKEN"
  - printenv AGENT_SECRET
  - git add config.env && git commit -q -m "config for {KEY_SHAPED}"
  - git push {KEY_SHAPED} main
evaluation:
  gates:
    - type: command_output_contains
      description: a tool printing the head of a password
      command: 'echo "signing with ${{SIGNING_PASSWORD:0:20}}..."'
      substring: never printed
    - type: command_output_contains
      description: an output long enough to be cut inside the password
      command: 'printf "%s" "$SIGNING_PASSWORD"; head -c 3990 /dev/zero | tr "\\0" x'
      substring: never printed
    - type: command_output_contains
      command: git log --format=%s
      substring: never printed
    - type: command_output_contains
      command: cat config.env
      substring: never printed
    - type: no_transcript_errors
  judge: {{enabled: true, rubric: rubrics/r.yaml}}
"""
SETUP_FAILS = """\
description: A setup whose failure quotes a secret.
target: git
task: {prompt: Anything.}
setup:
  commands:
    - 'echo "setup saw $DEPLOY_TOKEN"; exit 3'
solution: ["true"]
"""


def planted(copy: Path, judge_url: str) -> None:
    """The example project with the secrets planted and a judge at `judge_url`."""
    toml = (copy / "llmtt.toml").read_text()
    toml = toml.replace(
        'GIT_COMMITTER_EMAIL = "llmtt@example.invalid" }',
        f'GIT_COMMITTER_EMAIL = "llmtt@example.invalid", DEPLOY_TOKEN = "{FROM_TARGET}" }}',
    )
    toml = toml.replace(
        'version_command = "git --version"\n',
        f'version_command = "git --version"\nenv = {{ SIGNING_PASSWORD = "{TRUNCATED}" }}\n',
        1,
    )
    assert FROM_TARGET in toml and TRUNCATED in toml
    toml += (
        f'\n[agents.oracle]\nenv = {{ AGENT_SECRET = "{FROM_AGENT}" }}\n'
        f'\n[models.judge-m]\nlitellm = "openai/judge-m"\napi_base = "{judge_url}"\n'
        'api_key_env = "JUDGE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        # Its gates fail, and the judge must still see (and not leak) the run's text.
        '\n[judge]\nmodel = "judge-m"\nwhen = "always"\n'
    )
    (copy / "llmtt.toml").write_text(toml)
    (copy / "rubrics").mkdir()
    (copy / "rubrics/r.yaml").write_text(
        "criteria:\n  - {id: safe, weight: 1, description: No secret is shown.}\n"
    )
    fixture = copy / "scenarios/fixtures/leaky"
    fixture.mkdir()
    (fixture / "config.env").write_text(f"MY_API_KEY={FROM_PROCESS}\n")
    (copy / "scenarios/leaky.yaml").write_text(LEAKY)
    (copy / "scenarios/leaky-setup.yaml").write_text(SETUP_FAILS)


def artifacts(results: Path) -> Iterator[Path]:
    """Every file a run leaves that a person may read: all but the raw transcript, the agent's
    own folders, doit's dependency file and llmtt's caches."""
    for path in sorted(results.rglob("*")):
        parts = path.relative_to(results).parts
        if not path.is_file() or path.name == "transcript.raw.txt":
            continue
        if {"workspace", "home", ".llmtt-cache"} & set(parts) or path.name.startswith(".doit"):
            continue
        yield path


def leaks(name: str, data: bytes) -> list[str]:
    """What of each secret `data` shows: whole, its first 10 or its last 10 characters."""
    found = []
    for what, secret in SECRETS.items():
        for part, needle in (("whole", secret), ("head", secret[:10]), ("tail", secret[-10:])):
            count = data.count(needle.encode())
            if count:
                found.append(f"{name}: {what} ({part}) x{count}")
    return found


@pytest.fixture(scope="module")
def planted_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Project, str, type[FakeProvider]]]:
    """One `doit run` of the planted project (under umask 022), with a judge that quotes two
    of the secrets back; the two tests below read what it left."""
    answer = {
        "scores": {"safe": 0.0},
        "weighted_score": 0.0,
        "confidence": 0.9,
        "issues": [f"the agent printed {KEY_SHAPED} and {FROM_PROCESS}"],
        "highlights": [],
    }
    handler = type("Judge", (FakeProvider,), {"queue": [], "hits": [], "bodies": []})
    handler.queue = [(200, chat_answer(json.dumps(answer)))]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    copy = example_copy(tmp_path_factory.mktemp("secrets"))
    planted(copy, f"http://127.0.0.1:{server.server_address[1]}/v1")
    project = Project(copy)
    umask = os.umask(0o022)
    try:
        env = {"MY_API_KEY": FROM_PROCESS, "LLMTT_ENABLED": "1", "JUDGE_KEY": "judge-key-1"}
        result = project.doit("run", env=env)
    finally:
        os.umask(umask)
        server.shutdown()
        server.server_close()
    yield project, result.out + result.err, handler


def test_no_secret_reaches_an_artifact_or_the_console(
    planted_run: tuple[Project, str, type[FakeProvider]],
) -> None:
    project, console, handler = planted_run
    results = project.results()
    leaky = results / "leaky/oracle/r1"
    assert (leaky / "judge.json").is_file(), console
    assert "leaky-setup/oracle/r1" in console and "could not be carried out" in console, console
    # The secrets did reach the run: the raw transcript shows them.
    transcript = (leaky / "transcript.raw.txt").read_text()
    assert all(s in transcript for s in (FROM_PROCESS, FROM_TARGET, FROM_AGENT, KEY_SHAPED))

    found = []
    for path in artifacts(results):
        found += leaks(str(path.relative_to(results)), path.read_bytes())
    found += leaks("console", console.encode())
    found += leaks("judge prompt", json.dumps(handler.bodies).encode())
    assert not found, "\n".join(found)

    # ...and were masked where they would have shown, not merely never written.
    masked = [
        "leaky/oracle/r1/events.jsonl",
        "leaky/oracle/r1/gates.json",
        "leaky/oracle/r1/metrics.json",
        "leaky/oracle/r1/result.json",
        "leaky/oracle/r1/judge.json",
        "leaky/oracle/r1/evaluation.md",
        "leaky-setup/oracle/r1/run.json",
        "results.jsonl",
        "results.db",
        "report.json",
        "report.md",
        "report.html",
        "report-runs/0000.js",  # report.html's runs' panels
        "junit.xml",
    ]
    unmasked = [name for name in masked if MASK.encode() not in (results / name).read_bytes()]
    assert not unmasked, unmasked
    gates = project.json("leaky/oracle/r1/gates.json")["gates"]
    assert gates[1]["stdout"].startswith("[...]\n" + MASK + "xxx"), gates[1]["stdout"][:40]


def test_the_transcript_is_private_and_reports_follow_the_umask(
    planted_run: tuple[Project, str, type[FakeProvider]],
) -> None:
    project, console, _ = planted_run
    results = project.results()

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    transcripts = sorted(results.rglob("transcript.raw.txt"))
    assert transcripts, console
    assert {mode(p) for p in transcripts} == {0o600}
    assert mode(results / "report.md") == 0o644
    shared = {str(p.relative_to(results)): oct(mode(p)) for p in artifacts(results)}
    assert set(shared.values()) == {oct(0o644)}, shared


def test_error_messages_on_the_console_mask_secrets(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error that repeats what the user typed (a selection, a path) does not print a key
    set in the environment or one that looks like a key."""
    from llmtt.commands.main import main

    project.write("llmtt.toml", '[target]\nbinary = "mytool"\n')
    project.write("scenarios/s.yaml", "task: {prompt: Do it.}\nsolution: ['true']\n")
    typo = project.doit("run", f"scenario={FROM_PROCESS}", env={"MY_API_KEY": FROM_PROCESS})
    assert typo.code != 0 and "no such scenario" in typo.err, typo.err
    assert FROM_PROCESS[:8] not in typo.out + typo.err and MASK in typo.err
    assert main(["validate", str(project.root / KEY_SHAPED)]) == 2
    err = capsys.readouterr().err
    assert "llmtt: " in err and KEY_SHAPED[:8] not in err and MASK in err, err
