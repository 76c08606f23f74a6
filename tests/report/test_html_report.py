"""report.html opened in real headless Chromium: it renders its tables and charts, its script
runs without error, each run's panel shows its interaction metrics and marks its failed tool
calls (with what they said), the page fits an 800 px window, and screenshots are saved (tests/output/report.png,
report-800.png) for a person to look at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape as html_unescape
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

from llmtt.plan.runs import build_plan
from llmtt.report import aggregate as reports
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

OUT = Path(__file__).resolve().parents[1] / "output"
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
        '\n[matrix]\nvariants = ["v1", "v2"]\nrepeats = 3\n[compare]\nbaseline = "v1"\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Read AGENTS.md.}\nsolution: [cat AGENTS.md, 'git comit', git init -q .]\n"
        "evaluation:\n  composite: {gate_weight: 0.6, interaction_weight: 0.4}\n"
        "  gates:\n    - {type: file_contains, path: AGENTS.md, substring: two}\n",
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
    assert "FAIL" in dom.stdout
    # the comparison with the baseline comes first: verdict, subcommands, the guidance diff
    comparison = dom.stdout.index('id="comparison"')
    assert comparison < dom.stdout.index("Pass rate by agent / model / variant")
    assert "Baseline: <b>v1</b> ([compare] baseline)." in dom.stdout
    assert '<td class="verdict cant_tell">can\'t tell <span class="muted">(about ' in dom.stdout
    assert "<td>comit</td><td>1 → 1</td><td>1 → 1</td>" in dom.stdout
    assert '<span class="del">-one</span>' in dom.stdout
    assert '<span class="add">+two</span>' in dom.stdout
    # a panel: its interaction metrics, its composite score, its failed tool call marked red
    assert "tool_calls <b>3</b> (<span" in dom.stdout and "error_count <b" in dom.stdout
    assert "total_commands <b>2</b>" in dom.stdout and "cost_usd <b>0</b>" in dom.stdout
    assert "composite score 0.8" in dom.stdout and "composite score 0.2" in dom.stdout
    assert '<li class="failed">$ git comit</li>' in dom.stdout
    assert '<li class="failed">  -&gt; exit 1</li>' in dom.stdout
    assert '<li class="call">$ git init -q .</li>' in dom.stdout
    assert "1 failed tool call</b>" in dom.stdout
    assert (
        '<ul class="failed-calls"><li><b class="target" title="the line runs the target, the tool '
        "under test\">target</b> $ git comit <span>→ exit 1</span><pre>git: 'comit' is not a git "
        "command. See 'git --help'."
    ) in dom.stdout
    assert ">-<" not in dom.stdout  # no "-" placeholder in any cell
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert errors == [], errors
    OUT.mkdir(exist_ok=True)
    shot = OUT / "report.png"
    shot.unlink(missing_ok=True)
    picture = chromium(tmp_path, "--window-size=1280,1800", f"--screenshot={shot}", page.as_uri())
    assert picture.returncode == 0 and shot.stat().st_size > 20_000


PROBE = """<script>
document.querySelectorAll("details").forEach(function (d) { d.open = true; });
var page = document.documentElement, wide = [];
document.querySelectorAll("body *").forEach(function (e) {
  if (e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest(".scroll")) {
    wide.push(e.tagName + "." + e.className);
  }
});
document.body.dataset.measured = [window.innerWidth, page.scrollWidth].join(" ");
document.body.dataset.wide = wide.slice(0, 8).join(" ");
</script>
"""


def measure(tmp: Path, page: Path, extra: str = "") -> tuple[int, int, str]:
    """(viewport width, document width, elements past the right edge) of `page` opened at
    800 px wide with every run's panel open."""
    probe = page.with_name(f"probe{len(extra)}.html")
    probe.write_text(page.read_text().replace("</body>", extra + PROBE + "</body>"))
    dom = chromium(tmp, "--window-size=800,900", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-measured="(\d+) (\d+)" data-wide="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    return int(found[1]), int(found[2]), found[3]


def test_report_html_fits_an_800_px_window(project: Project, tmp_path: Path) -> None:
    names = ("guidance-for-agents-first-draft-v1", "guidance-for-agents-rewritten-v2")
    variants = "".join(
        f'\n[variants.{v}]\nfiles = {{ "AGENTS.md" = "guides/{v}.md" }}\n' for v in names
    )
    for v in names:
        project.write(f"guides/{v}.md", v + "\n")
    project.write(
        "llmtt.toml",
        GIT_TOML
        + variants
        + f"\n[matrix]\nvariants = {list(names)!r}\nrepeats = 2\n".replace("'", '"'),
    )
    # Paths break nowhere (hyphens would let a line break): only wrapping anywhere fits them.
    long_path = "src/report_generator/templates/" + "components_of_the_page_" * 5 + "x.txt"
    for scenario in (
        "commit-a-file-after-staging-it-and-writing-a-conventional-commit-message",
        "inspect-the-history-of-a-repository-with-many-branches-and-tags-in-it",
    ):
        project.write(
            f"scenarios/{scenario}.yaml",
            "tags: [git-basics-and-history-inspection, long-tag-names-everywhere]\n"
            "task: {prompt: x}\n"
            f"solution: [git init -q ., 'git add {long_path}', 'git log --oneline']\n"
            "evaluation:\n  composite: {gate_weight: 0.5, interaction_weight: 0.5}\n"
            "  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
            f"    - {{type: file_contains, path: AGENTS.md, substring: rewritten-{long_path}}}\n",
        )
    assert project.doit("run", "-n", "2").code == 0
    page = project.results() / "report.html"
    # every panel's session player built (as opening the panel builds it): 220 columns scroll
    # inside the terminal's own box
    players = (
        '<script>document.querySelectorAll("details").forEach(castPlayer);'
        # none built (the player broken): a page too wide, so the test says so
        'if (!document.querySelector("pre.term").textContent) {'
        ' document.body.insertAdjacentHTML("beforeend", \'<div style="width:1500px">none</div>\'); }'
        "</script>"
    )
    viewport, width, wide = measure(tmp_path, page, players)
    assert viewport == 800, "chromium did not lay the page out 800 px wide"
    assert width <= 800 and wide == "", (width, wide)
    # the measure sees a page that does scroll sideways
    viewport, width, wide = measure(tmp_path, page, '<div style="width: 1500px">x</div>')
    assert width > 800 and "DIV." in wide, (width, wide)
    OUT.mkdir(exist_ok=True)
    shot = OUT / "report-800.png"
    shot.unlink(missing_ok=True)
    picture = chromium(tmp_path, "--window-size=800,1400", f"--screenshot={shot}", page.as_uri())
    assert picture.returncode == 0 and shot.stat().st_size > 20_000


PLAYER_PROBE = """<script>
// the panel of the run that printed the lines below (another run has a player too)
var panel = Array.prototype.find.call(document.querySelectorAll("div.player"), function (p) {
  return p.textContent.indexOf("abcdef") >= 0;
}).closest("details");
panel.open = true;
var player = castPlayer(panel);
player.end();
document.body.dataset.frame = JSON.stringify(player.text());
document.body.dataset.red = panel.querySelector("pre.term span.f1").textContent;
// the screenshot shows the panel alone
Array.prototype.forEach.call(document.body.children, function (e) {
  if (e !== panel && e.tagName !== "SCRIPT") { e.style.display = "none"; }
});
</script>
"""


def test_report_html_plays_a_run_session_to_its_last_frame(
    project: Project, tmp_path: Path
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    # What a terminal shows differs from what was printed: a carriage return overwrites, an
    # erased line goes, a colour is a colour.
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: x}\nsolution:\n"
        "  - printf 'abcdef\\rXY\\n'\n"
        "  - printf 'gone\\033[2K\\rkept\\n'\n"
        "  - printf '\\033[31mred\\033[0m plain\\n'\n"
        "  - git init -q .\n",
    )
    project.write("scenarios/another.yaml", "task: {prompt: x}\nsolution: [git init -q .]\n")
    assert project.doit("run").code == 0
    page = project.results() / "report.html"
    html = page.read_text()
    assert html.count('<script type="application/json" class="cast">') == 2
    with pytest.MonkeyPatch.context() as patch:  # as in a report of over 1,000 runs: none
        patch.setattr(reports, "EVERY_CAST_UP_TO", 1)
        reports.aggregate(build_plan(load_project(project.root), Selection()))
    no_casts = page.read_text()
    assert no_casts.count('<script type="application/json" class="cast">') == 0
    assert no_casts.count("session: session.cast in the run's folder") == 2
    assert "<script src" not in html and "https://" not in html
    probe = page.with_name("player.html")
    probe.write_text(html.replace("</body>", PLAYER_PROBE + "</body>"))
    dom = chromium(tmp_path, "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-frame="([^"]*)" data-red="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-3000:]
    frame = json.loads(html_unescape(found[1]))
    lines = frame.splitlines()
    assert "$ printf 'abcdef\\rXY\\n'" in lines and "XYcdef" in lines
    erased = lines.index("$ printf 'gone\\033[2K\\rkept\\n'")
    assert lines[erased + 1] == "kept"  # "gone" was erased
    assert "red plain" in lines and found[2] == "red"
    # the last frame: the last command, then the cursor on an empty line
    assert lines[-2:] == ["$ git init -q .", ""]
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert errors == [], errors
    OUT.mkdir(exist_ok=True)
    shot = OUT / "report-player.png"
    shot.unlink(missing_ok=True)
    picture = chromium(tmp_path, "--window-size=1280,1200", f"--screenshot={shot}", probe.as_uri())
    assert picture.returncode == 0 and shot.stat().st_size > 10_000
