"""`llmtt agents install`: the pinned CLIs, installed by the real npm from the lock files that
ship with llmtt, found by every project without an `executable` setting, and run for real.

npm runs with `offline`: it takes the packages from its cache, which `scripts/setup test`
filled when it installed the same pinned versions, so no test reaches a registry."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, GIT_TOML, Project

from llmtt.agents.install import CLI_AGENTS, PINS, pinned

ROOT = Path(__file__).resolve().parents[2]
LLMTT = str(BIN / "llmtt")
OFFLINE = {"npm_config_offline": "true", "npm_config_update_notifier": "false"}


def llmtt(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    return subprocess.run(
        [LLMTT, *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_shipped_pins_are_the_versions_the_repository_tests_with() -> None:
    """llmtt/agents/npm/ (what a wheel installs) and package.json (what the tests run) agree,
    down to every package's integrity in the two lock files."""
    root = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    root_lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    for agent in CLI_AGENTS:
        package, _, version = pinned(agent).rpartition("@")
        assert root[package] == version, agent
        lock = json.loads((PINS / agent / "package-lock.json").read_text())["packages"]
        assert lock[""]["dependencies"] == {package: version}
        for path, entry in lock.items():
            if path:
                assert entry.get("integrity") == root_lock[path].get("integrity"), (agent, path)


@pytest.mark.parametrize("folder", [".", *(f"llmtt/agents/npm/{a}" for a in CLI_AGENTS)])
def test_npm_ci_takes_every_shipped_lock(folder: str, tmp_path: Path) -> None:
    """Every lock is in sync with its package.json for npm ci (on every platform: opencode's
    packages for the other systems are in it too, skipped here by their os and cpu)."""
    for name in ("package.json", "package-lock.json"):
        (tmp_path / name).write_bytes((ROOT / folder / name).read_bytes())
    done = subprocess.run(
        ["npm", "ci", "--dry-run", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=tmp_path,
        env={**os.environ, **OFFLINE},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's agents folder after `llmtt agents install opencode --dir`."""
    agents = tmp_path_factory.mktemp("user") / "agents"
    done = llmtt("agents", "install", "opencode", "--dir", str(agents), env=OFFLINE, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"LLMTT_AGENTS_DIR={agents}" in done.stdout
    return agents


def test_install_puts_the_pinned_cli_in_the_folder_named(installed: Path) -> None:
    binary = installed / "opencode" / "node_modules" / ".bin" / "opencode"
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert version.stdout.strip() == pinned("opencode").rpartition("@")[2]
    # Only the finished folder is left: no staging folder beside it.
    assert sorted(p.name for p in installed.iterdir()) == ["opencode"]


def test_every_project_finds_it_and_runs_it(installed: Path, tmp_path: Path) -> None:
    project = Project(tmp_path / "proj")
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/init.yaml",
        "task:\n  prompt: Make this folder a git repository.\n"
        "solution:\n  - git init -q .\n"
        "run: {timeout_secs: 120}\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n",
    )
    env = {"LLMTT_AGENTS_DIR": str(installed)}
    listed = llmtt("agents", env=env, cwd=project.root)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("opencode "))
    expected = installed / "opencode" / "node_modules" / ".bin" / "opencode"
    assert f"(user: {expected})" in line and pinned("opencode") in line

    result = project.doit("run", "agent=opencode", "model=scripted", env=env)
    assert result.code == 0, result.out + result.err
    metrics = project.json("init/opencode-scripted/r1/metrics.json")
    assert metrics["outcome"] == "pass" and metrics["total_commands"] == 1
    # Without the folder the same project says what to run.
    missing = project.doit(
        "run", "agent=opencode", "model=scripted", env={"LLMTT_AGENTS_DIR": str(tmp_path / "x")}
    )
    assert "opencode is not installed: run `llmtt agents install opencode`" in (
        missing.out + missing.err
    )


def test_what_llmtt_installed_comes_before_path_and_the_setting_before_both(
    installed: Path, tmp_path: Path
) -> None:
    other = tmp_path / "bin"
    other.mkdir()
    (other / "opencode").write_text("#!/bin/sh\necho 0.0.1\n")
    (other / "opencode").chmod(0o755)
    env = {"LLMTT_AGENTS_DIR": str(installed), "PATH": f"{other}{os.pathsep}{os.environ['PATH']}"}
    project = Project(tmp_path / "proj")
    project.write("llmtt.toml", GIT_TOML)
    line = next(
        x
        for x in llmtt("agents", env=env, cwd=project.root).stdout.splitlines()
        if x.startswith("opencode ")
    )
    assert "(user: " in line and "0.0.1" not in line
    project.write(
        "llmtt.toml", GIT_TOML + f'\n[agents.opencode]\nexecutable = "{other}/opencode"\n'
    )
    line = next(
        x
        for x in llmtt("agents", env=env, cwd=project.root).stdout.splitlines()
        if x.startswith("opencode ")
    )
    assert f"0.0.1 (llmtt.toml: {other}/opencode)" in line
    # Without llmtt's folder, PATH serves; a version other than the pinned one is pointed out.
    env["LLMTT_AGENTS_DIR"] = str(tmp_path / "none")
    project.write("llmtt.toml", GIT_TOML)
    line = next(
        x
        for x in llmtt("agents", env=env, cwd=project.root).stdout.splitlines()
        if x.startswith("opencode ")
    )
    assert f"0.0.1 (PATH: {other}/opencode), not the pinned version" in line


def test_a_failed_install_changes_nothing(installed: Path, tmp_path: Path) -> None:
    """npm with an empty cache and no network fails: the installed CLI stays as it was, and no
    half-installed folder is left beside it."""
    before = sorted(p.name for p in (installed / "opencode" / "node_modules").iterdir())
    env = {**OFFLINE, "npm_config_cache": str(tmp_path / "empty-cache")}
    done = llmtt("agents", "install", "opencode", "--dir", str(installed), env=env, cwd=ROOT)
    assert done.returncode == 2
    assert f"npm install {pinned('opencode')} failed" in done.stderr
    assert f"Nothing was changed in {installed}" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in installed.iterdir()) == ["opencode"]
    assert sorted(p.name for p in (installed / "opencode" / "node_modules").iterdir()) == before


def test_an_unknown_agent_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    done = llmtt(
        "agents", "install", "opencode", "cladue-code", "--dir", str(tmp_path), env={}, cwd=ROOT
    )
    assert done.returncode == 2
    assert "unknown agent 'cladue-code'; installable: claude-code, opencode, codex" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_llmtt_doit_is_doit_with_llmtts_python(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/init.yaml",
        "task:\n  prompt: Make this folder a git repository.\n"
        "solution:\n  - git init -q .\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n",
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    # Only llmtt's own entry point, as pipx or uv tool would put on PATH: no doit, no python.
    done = subprocess.run(
        [LLMTT, "doit", "run"],
        cwd=project.root,
        env={**clean, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert project.json("init/oracle/r1/metrics.json")["outcome"] == "pass"
    failed = subprocess.run(
        [LLMTT, "doit", "run", "scenario=nope"],
        cwd=project.root,
        env={**clean, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    # The exit code and message are those of `doit` itself.
    direct = project.doit("run", "scenario=nope")
    assert (failed.returncode, failed.stderr) == (direct.code, direct.err)
    assert failed.returncode == 2 and "no such scenario" in failed.stderr
