"""From nothing to a passing first scenario, as the README tells a user: a fresh virtualenv,
`pip install` of llmtt's wheel (built here from the checkout, never the editable install),
`llmtt init --target X` for a real third-party CLI, `doit run`. That is the core install: it
brings no litellm, and needs none (prices come from llmtt's own table).

The README's commands are run as written (only the wheel's path and the tool's name are filled
in). pip takes llmtt's dependencies from the wheels `scripts/setup test` collected, with no
index: the test reaches no registry, and still resolves every dependency the wheel declares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"


def readme_commands() -> list[str]:
    """The shell block of the README's "Using it in your project", comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it in your project") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no sh block under 'Using it in your project'"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llmtt's wheel, built from a copy of the checkout's sources."""
    assert (WHEELHOUSE / ".llmtt-setup").is_file(), (
        f"{WHEELHOUSE} missing: run ./scripts/setup test"
    )
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "llmtt", source / "llmtt", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--find-links",
            str(WHEELHOUSE),
            "-w",
            str(base / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (found,) = (base / "dist").glob("llmtt-*.whl")
    return found


def test_readme_commands_take_an_empty_folder_to_a_passing_first_scenario(
    wheel: Path, tmp_path: Path
) -> None:
    commands = readme_commands()
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate",
        "pip install PATH/TO/llmtt",
        "llmtt init --target mytool",
        "doit run",
    ]
    tool = BIN / "sqlite-utils"  # a real third-party CLI (click), as the user's own tool
    script = "\n".join(
        c.replace("PATH/TO/llmtt", str(wheel)).replace("mytool", str(tool)) for c in commands
    )
    folder = tmp_path / "mytool-repo"
    folder.mkdir()
    python_bin = Path(getattr(sys, "_base_executable", sys.executable)).parent
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env |= {
        # Only the system and the interpreter's own folder: nothing of llmtt's checkout.
        "PATH": f"{python_bin}:/usr/bin:/bin",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONNOUSERSITE": "1",
    }
    done = subprocess.run(
        [
            "bash",
            "-euc",
            script
            + "\nllmtt check\nllmtt agents\npip list --format freeze"
            + "\npython -c 'import llmtt; print(llmtt.__file__)'",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "llmtt: 1 runs: 1 passed, 0 failed" in done.stdout
    metrics = folder / "llm-tool-test-results/first/oracle/r1/metrics.json"
    assert '"outcome": "pass"' in metrics.read_text()
    # The installed wheel ran, not the checkout, with its shipped pins and templates.
    site = folder / ".venv/lib/python3.11/site-packages/llmtt/__init__.py"
    assert done.stdout.strip().splitlines()[-1] == str(site)
    assert "not installed: llmtt agents install claude-code" in done.stdout
    installed = {line.split("==")[0].lower() for line in done.stdout.splitlines() if "==" in line}
    assert {"llmtt", "doit", "pydantic"} <= installed and "litellm" not in installed
    assert (folder / "llm-tool-test-results/first/oracle/r1/evaluation.md").is_file()


def test_a_uv_tool_install_runs_a_suite_through_llmtt_doit(wheel: Path, tmp_path: Path) -> None:
    """`uv tool install` puts only `llmtt` on PATH; `llmtt doit run` is then the way in."""
    home = tmp_path / "home"
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "UV_TOOL_DIR": str(home / "tools"),
        "UV_TOOL_BIN_DIR": str(home / "bin"),
        "UV_CACHE_DIR": str(home / "uv-cache"),
    }
    installed = subprocess.run(
        [
            str(BIN / "uv"),
            "tool",
            "install",
            "--offline",
            "--no-index",
            "--find-links",
            str(WHEELHOUSE),
            str(wheel),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    assert sorted(p.name for p in (home / "bin").iterdir()) == ["llmtt"]
    (site,) = (home / "tools" / "llmtt" / "lib").glob("python3*/site-packages")
    assert (site / "doit").is_dir() and not list(site.glob("litellm*"))  # the core install
    folder = tmp_path / "repo"
    folder.mkdir()
    llmtt = str(home / "bin" / "llmtt")
    script = f"{llmtt} init --target git\n{llmtt} doit run\n{llmtt} doit list --status"
    done = subprocess.run(
        ["bash", "-euc", script], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "llmtt: 1 runs: 1 passed, 0 failed" in done.stdout
    assert "U first/oracle/r1" in done.stdout  # up to date after the run
