"""report.html opened in real headless Chromium: it renders its tables and charts, its script
runs without error, and a screenshot is saved (tests/output/report.png) for a person to look at."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import GIT_TOML, Project

OUT = Path(__file__).resolve().parent / "output"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    assert exe, "chromium is missing: ./scripts/test installs Debian's chromium package"
    return subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_html_renders_tables_charts_and_script(project: Project, tmp_path: Path) -> None:
    project.write("guides/v1.md", "one\n")
    project.write("guides/v2.md", "two\n")
    project.write(
        "llmtt.toml",
        GIT_TOML + '\n[variants.v1]\nfiles = { "AGENTS.md" = "guides/v1.md" }\n'
        '\n[variants.v2]\nfiles = { "AGENTS.md" = "guides/v2.md" }\n'
        '\n[matrix]\nvariants = ["v1", "v2"]\nrepeats = 3\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Read AGENTS.md.}\nsolution: [cat AGENTS.md, 'git comit']\n"
        "evaluation:\n  gates:\n    - {type: file_contains, path: AGENTS.md, substring: two}\n",
    )
    assert project.doit("run", "-n", "2").code == 0
    page = project.results() / "report.html"
    html = page.read_text()
    assert (
        "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    )
    dom = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout  # the script ran to its end
    assert dom.stdout.count("<table") >= 3 and dom.stdout.count('class="bar"') == 2
    assert "variant v1 vs v2" in dom.stdout and "FAIL" in dom.stdout and "$ git comit" in dom.stdout
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert errors == [], errors
    OUT.mkdir(exist_ok=True)
    shot = OUT / "report.png"
    shot.unlink(missing_ok=True)
    picture = chromium(tmp_path, "--window-size=1280,1800", f"--screenshot={shot}", page.as_uri())
    assert picture.returncode == 0 and shot.stat().st_size > 20_000
