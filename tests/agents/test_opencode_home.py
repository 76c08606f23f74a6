"""opencode's files in a run's HOME come from a template made once per project and binary
(llmtt/agents/opencode_home.py): two real opencode runs on the scripted model, one `doit run`;
then the template's making and laying, with a stand-in for opencode."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import TOOL_TOML, Project, cli_project

from llmtt.agents.opencode_home import FOLDER, seed_home, template_key
from llmtt.commands.clean import clean
from llmtt.process.sandbox.bwrap import Sandbox, find_bwrap, unavailable

DATABASE = Path(".local/share/opencode/opencode.db")


def _migrated(database: Path) -> list[int]:
    with sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True) as connection:
        return [row[0] for row in connection.execute("SELECT time_completed FROM migration")]


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
        setup:
          commands:
            - mkdir -p ~/.config/opencode
            - >-
              echo '{"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}},
              "by": "setup"}' > ~/.config/opencode/package-lock.json
        solution: [echo hello > out.txt]
        run: {timeout_secs: 120}
        evaluation: {gates: [{type: file_exists, path: out.txt}]}
        """,
    )
    result = project.doit("run", "-n", "2", "agent=opencode", "model=scripted")
    assert result.code == 0, result.out + result.err

    (template,) = (p for p in (project.root / FOLDER).iterdir() if p.is_dir())
    assert _sessions(template / DATABASE) == []  # nothing of a run goes back into it
    seen = []
    runs = ("r1", "r2")

    def home(run: str) -> Path:
        return project.results() / "hello" / "opencode-scripted" / run / "home"

    for run in runs:
        # The template's config folder (opencode writes no package.json there offline): it
        # took its plugin package as installed, and neither loaded npm's installer nor asked
        # the registry.
        manifest = json.loads((home(run) / ".config" / "opencode" / "package.json").read_text())
        assert "@opencode-ai/plugin" in manifest["dependencies"]
        # What the scenario's setup wrote there is its own: the template never overwrites it.
        lock = json.loads((home(run) / ".config" / "opencode" / "package-lock.json").read_text())
        assert lock["by"] == "setup"
        # The database, migrated before the run: it holds this run's session and no other.
        (session,) = _sessions(home(run) / DATABASE)
        seen.append(session)
    assert seen[0] != seen[1]
    # The template's own database, not one opencode made in the run's HOME: each migration
    # completed when the template was made, not during the run.
    assert all(_migrated(home(run) / DATABASE) == _migrated(template / DATABASE) for run in runs)


# A stand-in for `opencode db "SELECT count(*) FROM session"`: it makes a migrated database
# with no session where opencode makes its own (under XDG_DATA_HOME), says 0, and tries to
# write beside the test's files. A file `fail` beside it makes it fail; a file `channel`, name
# its database by release channel as newer opencode does; each start adds a line to `starts`
# (seen only when it is not confined). A file `slow` makes it take a while.
FAKE = """\
#!/usr/bin/python3
import os, pathlib, sqlite3, sys, time
here = pathlib.Path(__file__).resolve().parent
for path, text in ((here / "starts", "start\\n"), (pathlib.Path({escape!r}), "written")):
    try:
        with open(path, "a") as out:
            out.write(text)
    except OSError:
        pass
if (here / "slow").exists():
    time.sleep(0.5)
if (here / "fail").exists():
    sys.exit("no database today")
name = "opencode-beta.db" if (here / "channel").exists() else "opencode.db"
folder = pathlib.Path(os.environ["XDG_DATA_HOME"]) / "opencode"
folder.mkdir(parents=True, exist_ok=True)
with sqlite3.connect(folder / name) as db:
    db.execute("CREATE TABLE migration (id TEXT PRIMARY KEY, time_completed INTEGER)")
    db.execute("INSERT INTO migration VALUES ('1', ?)", (time.time_ns(),))
    db.execute("CREATE TABLE session (id TEXT)")
print(0)
"""


def _fake(tmp_path: Path) -> tuple[str, Path]:
    """The stand-in's path, and the file it tries to write outside its HOME."""
    folder = tmp_path / "bin"
    folder.mkdir()
    escape = tmp_path / "outside" / "escape"
    escape.parent.mkdir()
    exe = folder / "opencode"
    exe.write_text(FAKE.format(escape=str(escape)))
    exe.chmod(0o755)
    return str(exe), escape


def _starts(exe: str) -> int:
    starts = Path(exe).parent / "starts"
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def _home(tmp_path: Path, name: str) -> Path:
    home = tmp_path / name
    home.mkdir()
    return home


def test_a_link_a_home_holds_is_never_written_through_and_its_files_are_kept(
    tmp_path: Path,
) -> None:
    exe, _ = _fake(tmp_path)
    root = tmp_path / "proj"
    assert seed_home(_home(tmp_path, "first"), exe, root, None)
    outside = tmp_path / "outside"
    (outside / "authorized_keys").write_text("ssh-ed25519 mine")
    (outside / "data").mkdir()
    home = _home(tmp_path, "home")
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "package.json").symlink_to(outside / "authorized_keys")
    (home / ".config" / "opencode" / "package-lock.json").write_text("the HOME's own")
    (home / ".local" / "share").mkdir(parents=True)
    (home / ".local" / "share" / "opencode").symlink_to(outside / "data")
    assert seed_home(home, exe, root, None)
    assert (outside / "authorized_keys").read_text() == "ssh-ed25519 mine"
    assert list((outside / "data").iterdir()) == []
    assert (home / ".config" / "opencode" / "package-lock.json").read_text() == "the HOME's own"
    assert (home / ".config" / "opencode" / "node_modules").is_dir()
    # A HOME that is no folder gets nothing, and the run goes on.
    (tmp_path / "not-a-folder").write_text("")
    assert not seed_home(tmp_path / "not-a-folder", exe, root, None)


def test_the_template_is_made_in_the_sandbox_when_runs_are_confined(tmp_path: Path) -> None:
    bwrap = find_bwrap()
    if unavailable(bwrap) is not None:
        pytest.skip(f"no sandbox here: {unavailable(bwrap)}")
    assert bwrap is not None
    exe, escape = _fake(tmp_path)
    sandbox = Sandbox(bwrap, read_only=(Path(exe).parent,))
    home = _home(tmp_path, "home")
    assert seed_home(home, exe, tmp_path / "proj", sandbox)
    assert _migrated(home / DATABASE) and not escape.exists()
    # Unconfined on purpose, it reaches what it can (this test tells the two apart).
    assert seed_home(_home(tmp_path, "other"), exe, tmp_path / "other-proj", None)
    assert escape.read_text() == "written"


def test_a_template_removed_is_made_again_and_a_database_of_another_name_is_none(
    tmp_path: Path,
) -> None:
    exe, _ = _fake(tmp_path)
    root = tmp_path / "proj"
    assert seed_home(_home(tmp_path, "a"), exe, root, None)
    shutil.rmtree(root / ".llmtt")  # as `rm -rf .llmtt` between two runs of one worker
    home = _home(tmp_path, "b")
    assert seed_home(home, exe, root, None) and _migrated(home / DATABASE)
    assert _starts(exe) == 2
    # An opencode that names its database by channel: no empty database is made in its stead.
    (Path(exe).parent / "channel").write_text("")
    other = tmp_path / "other-proj"
    home = _home(tmp_path, "c")
    assert not seed_home(home, exe, other, None)
    assert not (home / DATABASE).exists()
    (failed,) = (other / FOLDER).glob("*.failed")
    assert "unable to open database" in failed.read_text()


def test_a_failed_make_is_tried_once_an_hour_and_one_process_makes_at_a_time(
    tmp_path: Path,
) -> None:
    exe, _ = _fake(tmp_path)
    (Path(exe).parent / "fail").write_text("")
    root = tmp_path / "proj"
    for name in ("a", "b"):
        assert not seed_home(_home(tmp_path, name), exe, root, None)
    assert _starts(exe) == 1  # the failure is on disk: other processes (of -n 8) skip it too
    (failed,) = (root / FOLDER).glob("*.failed")
    assert "no database today" in failed.read_text()
    hour_ago = time.time() - 3601
    os.utime(failed, (hour_ago, hour_ago))
    (Path(exe).parent / "fail").unlink()
    (Path(exe).parent / "slow").write_text("")
    homes = [_home(tmp_path, f"w{i}") for i in range(4)]
    with ThreadPoolExecutor(len(homes)) as pool:
        seeded = list(pool.map(lambda h: seed_home(h, exe, root, None), homes))
    assert seeded == [True] * 4 and _starts(exe) == 2  # one made it, the others waited
    assert not failed.exists()
    assert len({_migrated(h / DATABASE)[0] for h in homes}) == 1


def test_clean_removes_templates_no_run_uses_and_killed_makes_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe, _ = _fake(tmp_path)
    project = Project(tmp_path / "proj")
    project.write("llmtt.toml", f'{TOOL_TOML}\n[agents.opencode]\nexecutable = "{exe}"\n')
    assert seed_home(_home(tmp_path, "home"), exe, project.root, None)
    folders = project.root / FOLDER
    kept = folders / template_key(exe)
    for name in ("0123456789abcdef", f".{kept.name}-killed"):
        (folders / name / "x").mkdir(parents=True)
    (folders / "0123456789abcdef.failed").write_text("an older opencode")
    assert clean(project.root, None, yes=False) == 0
    assert "would remove" in capsys.readouterr().out and (folders / "0123456789abcdef").exists()
    assert clean(project.root, None, yes=True) == 0
    said = capsys.readouterr().out
    assert "opencode's template for another opencode binary" in said
    assert "left by a template's make that was stopped" in said
    assert sorted(p.name for p in folders.iterdir()) == [".lock", kept.name]
