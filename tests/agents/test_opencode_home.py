"""opencode's files in a run's HOME come from a template made once per project and binary
(llmtt/agents/opencode_home.py): two real opencode runs on the scripted model, one `doit run`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import cli_project

DATABASE = Path(".local/share/opencode/opencode.db")


def _sessions(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return [row[0] for row in connection.execute("SELECT id FROM session")]


def test_each_run_starts_from_the_template_and_sees_no_other_runs_session(
    tmp_path: Path,
) -> None:
    project = cli_project(tmp_path / "proj", "[matrix]\nrepeats = 2\n")
    project.write(
        "scenarios/hello.yaml",
        """\
        task: {prompt: Write hello to out.txt.}
        solution: [echo hello > out.txt]
        run: {timeout_secs: 120}
        evaluation: {gates: [{type: file_exists, path: out.txt}]}
        """,
    )
    result = project.doit("run", "-n", "2", "agent=opencode", "model=scripted")
    assert result.code == 0, result.out + result.err

    (template,) = (project.root / ".llmtt" / "opencode-home").iterdir()
    assert _sessions(template / DATABASE) == []  # nothing of a run goes back into it
    seen = []
    for run in ("r1", "r2"):
        home = project.results() / "hello" / "opencode-scripted" / run / "home"
        # The template's config folder (opencode writes no package.json there offline): it
        # took its plugin package as installed, and neither loaded npm's installer nor asked
        # the registry.
        manifest = json.loads((home / ".config" / "opencode" / "package.json").read_text())
        assert "@opencode-ai/plugin" in manifest["dependencies"]
        # The database, migrated before the run: it holds this run's session and no other.
        (session,) = _sessions(home / DATABASE)
        seen.append(session)
    assert seen[0] != seen[1]
