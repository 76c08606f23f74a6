"""Gates are independent: each command gate has its own scratch workspace copy, HOME, XDG folders
and TMPDIR outside the run folder; nothing one gate writes reaches the next gate or the results."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from conftest import GIT_TOML, Project

FOLDERS = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "TMPDIR",
)


def test_what_one_gate_writes_reaches_neither_the_next_gate_nor_the_run_folder(
    project: Project,
) -> None:
    mark = f"gate-mark-{uuid.uuid4().hex[:12]}"  # unique: /tmp is shared with other tests
    writes = " ".join(f'"${{{var}:-/tmp}}/{mark}"' for var in FOLDERS) + f" {mark}"
    absent = " && ".join(f'test ! -e "${{{var}:-/tmp}}/{mark}"' for var in FOLDERS)
    shown = " ".join(f"${{{var}:-/tmp}}" for var in FOLDERS)
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/iso.yaml",
        f"""\
        task: {{prompt: Leave a file.}}
        solution: [echo hi > made.txt]
        evaluation:
          gates:
            - type: command_succeeds
              command: 'echo {shown}; touch {writes}'
            - type: command_succeeds
              command: '{absent} && test ! -e {mark} && test -f made.txt'
            - type: command_succeeds
              command: 'echo {shown}'
            - {{type: file_exists, path: {mark}}}
        """,
    )
    try:
        result = project.doit("run")
        assert result.code == 0, result.out + result.err
        gates = project.json("iso/oracle/r1/gates.json")["gates"]
        assert [g["passed"] for g in gates] == [True, True, True, False], gates
        first = gates[0]["stdout"].split()
        third = gates[2]["stdout"].split()
        assert len(first) == len(FOLDERS) == len(third)
        # TMPDIR is /tmp inside each gate's sandbox: the gate's own scratch folder is seen there
        # (the second gate proves the first one's /tmp did not reach it).
        assert first[-1] == third[-1] == "/tmp"
        for folder, later in zip(first[:-1], third[:-1], strict=True):
            assert folder != later  # each gate its own folders
            assert not Path(folder).is_relative_to(project.results() / "iso")  # not the run's
            assert not Path(folder, mark).exists()  # removed with the gate
        assert first[0] != "/tmp"
        run_dir = project.results() / "iso/oracle/r1"
        left = [p for p in run_dir.rglob("*") if mark in p.name]
        assert left == [], left
        assert (run_dir / "workspace" / "made.txt").exists()
    finally:
        Path("/tmp", mark).unlink(missing_ok=True)
        for var in FOLDERS:
            if os.environ.get(var):
                Path(os.environ[var], mark).unlink(missing_ok=True)
