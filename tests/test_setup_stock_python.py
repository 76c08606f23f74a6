"""The README's set-up on the operating system's own Python, in a clean environment, as a new
user on Debian 12 has it: /usr/bin/python3 (3.11.2, whose new virtualenvs carry pip 23.0.1 and
no `wheel`), nothing but the system's PATH, an empty HOME, no pip configuration from the
developer's shell. The image's other Pythons (pyenv's, with a newer pip) once hid a set-up that
failed there.

A copy of the checkout's tracked files runs `./scripts/example` (set-up, then the example suite
with the oracle) and then `scripts/setup test`, whose wheelhouse (`pip wheel` of every locked
dependency, afinn's sdist among them) is where Debian's pip failed. Packages come from the
registries, with empty caches: this is a system test of a few minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STOCK = Path("/usr/bin/python3")


def stock_python() -> Path:
    """/usr/bin/python3 with venv; a missing one fails the test with what to install."""
    assert STOCK.is_file(), (
        f"{STOCK} is missing: install the system's Python (apt-get install python3 python3-venv)"
    )
    probe = subprocess.run(
        [str(STOCK), "-c", "import ensurepip, venv"], capture_output=True, text=True, timeout=60
    )
    assert probe.returncode == 0, (
        f"{STOCK} has no venv: apt-get install python3-venv\n{probe.stderr}"
    )
    return STOCK


def checkout_copy(folder: Path) -> Path:
    """The checkout's tracked files as they are now (a clone, with uncommitted edits kept)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    )
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        target = folder / name
        if name and source.is_symlink():  # as git keeps a link (skills/llmtt): a link
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), target)
        elif name and source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """A command's output; its failure fails the test with that output."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}"
    return done.stdout


def test_the_readme_set_up_works_on_the_systems_own_python(tmp_path: Path) -> None:
    python = stock_python()
    checkout = checkout_copy(tmp_path / "llmtt")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHON": str(python)}
    try:
        out = run(["./scripts/example"], checkout, env)
        assert "0 could not be carried out" in out, out
        venv = checkout / ".venv"
        base = run(
            [str(venv / "bin/python"), "-c", "import sys; print(sys._base_executable)"],
            checkout,
            env,
        )
        assert Path(base.strip()).resolve() == python.resolve()

        run(["./scripts/setup", "test"], checkout, env)
        wheels = {path.name.split("-")[0].lower() for path in (venv / "wheelhouse").glob("*.whl")}
        # The core's wheels (what `pip install llmtt` needs, litellm not among them), afinn
        # built from its sdist by this Python's own pip.
        assert {"afinn", "doit", "setuptools", "wheel"} <= wheels, sorted(wheels)
        assert "litellm" not in wheels, sorted(wheels)
        tools = run([str(venv / "bin/python"), "-m", "pip", "list"], checkout, env)
        assert all(f"{tool} " in tools for tool in ("litellm", "pytest", "ray", "scipy", "uv")), (
            tools
        )
    finally:
        # Two virtualenvs and node_modules: about 2 GB, not left for pytest's last three runs.
        shutil.rmtree(checkout, ignore_errors=True)
