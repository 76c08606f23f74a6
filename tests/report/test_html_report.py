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
from conftest import GIT_TOML, Project, run_panels

from llmtt.plan.runs import build_plan
from llmtt.report import aggregate as reports
from llmtt.report import cache as report_cache
from llmtt.report import panels
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


# Every run opened as a click opens it; `then` is called once each run's panel has been read
# from report-runs/ (or has said why it cannot be).
OPEN_RUNS = """<script>
function whenOpened(then) {
  document.querySelectorAll("details.run > summary").forEach(function (s) { s.click(); });
  (function wait() {
    if (document.querySelector("details.run > .panel-state.muted")) { setTimeout(wait, 10); }
    else { then(); }
  })();
}
</script>
"""


def opened(tmp: Path, page: Path, then: str = "", *args: str) -> subprocess.CompletedProcess[str]:
    """The DOM of `page` with every run opened, once their panels are read (a copy of the page
    beside it, with `then`, a script's statements, run after that)."""
    probe = page.with_name("opened.html")
    script = OPEN_RUNS + f"<script>whenOpened(function () {{ {then} }});</script>"
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    return chromium(tmp, "--virtual-time-budget=20000", *args, "--dump-dom", probe.as_uri())


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
    # The runs' panels are not in the page: each is read from report-runs/ once opened.
    assert "tool_calls <b>" not in html and len(run_panels(project.results())) == 6
    dom = opened(tmp_path, page)
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
whenOpened(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  if (window.afterPanels) { afterPanels(); }
  var page = document.documentElement, wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest(".scroll")) {
      wide.push(e.tagName + "." + e.className);
    }
  });
  document.body.dataset.measured = [window.innerWidth, page.scrollWidth].join(" ");
  document.body.dataset.wide = wide.slice(0, 8).join(" ");
});
</script>
"""


def measure(tmp: Path, page: Path, extra: str = "") -> tuple[int, int, str]:
    """(viewport width, document width, elements past the right edge) of `page` opened at
    800 px wide with every run's panel open (`extra`: markup put in the page, which may
    define `afterPanels()`, called once the panels are there)."""
    probe = page.with_name(f"probe{len(extra)}.html")
    probe.write_text(page.read_text().replace("</body>", extra + OPEN_RUNS + PROBE + "</body>"))
    dom = chromium(
        tmp, "--window-size=800,900", "--virtual-time-budget=20000", "--dump-dom", probe.as_uri()
    )
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
        "<script>function afterPanels() {"
        'document.querySelectorAll("details").forEach(castPlayer);'
        # none built (the player broken, or no panel read): a page too wide, so the test says so
        'var term = document.querySelector("pre.term");'
        "if (!term || !term.textContent) {"
        ' document.body.insertAdjacentHTML("beforeend", \'<div style="width:1500px">none</div>\'); }'
        "}</script>"
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


# The panel of the run that printed the lines below (another run has a player too), played to
# its end; then the panel alone, for the screenshot.
PLAYER_PROBE = """
var panel = Array.prototype.find.call(document.querySelectorAll("div.player"), function (p) {
  return p.textContent.indexOf("abcdef") >= 0;
}).closest("details");
var player = castPlayer(panel);
player.end();
document.body.dataset.frame = JSON.stringify(player.text());
document.body.dataset.red = panel.querySelector("pre.term span.f1").textContent;
Array.prototype.forEach.call(document.getElementById("run-list").children, function (e) {
  if (e !== panel) { e.style.display = "none"; }
});
Array.prototype.forEach.call(document.body.children, function (e) {
  if (e !== panel.parentNode && e.tagName !== "SCRIPT") { e.style.display = "none"; }
});
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
    casts = [
        p.count('<script type="application/json" class="cast">')
        for p in run_panels(project.results()).values()
    ]
    assert casts == [1, 1]  # every run's recording, read when its run is opened
    assert "https://" not in html
    dom = opened(tmp_path, page, PLAYER_PROBE)
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
    probe = page.with_name("opened.html")
    picture = chromium(
        tmp_path,
        "--window-size=1280,1200",
        "--virtual-time-budget=20000",
        f"--screenshot={shot}",
        probe.as_uri(),
    )
    assert picture.returncode == 0 and shot.stat().st_size > 10_000


# The list's pages and filter, then each run opened by its link, with what its panel said (and
# all its text, as it is), and the files the page asked for.
SAID = """<script>
var said = {}, text = {}, seen = [document.getElementById("run-shown").textContent];
var asked = [], append = document.head.appendChild;
document.head.appendChild = function (e) { asked.push(e.src); return append.call(this, e); };
document.getElementById("run-next").click();
seen.push(document.getElementById("run-list").textContent);
var filter = document.getElementById("run-filter");
filter.value = "C/ORACLE";
filter.dispatchEvent(new Event("input"));
seen.push(document.getElementById("run-shown").textContent);
var ids = [SECRET_RUN, "b/oracle/r1", "c/oracle/r1"];
(function next() {
  var id = ids.shift();
  if (!id) {
    document.body.dataset.said = JSON.stringify([said, seen, text, asked]);
    return;
  }
  location.hash = "#" + id;
  (function wait() {
    var run = document.getElementById(id), state = run && run.querySelector(":scope > .panel-state");
    if (!run || (state && state.className.indexOf("muted") >= 0)) { setTimeout(wait, 10); return; }
    said[id] = (state || run.querySelector(".metrics")).textContent.replace(/\\s+/g, " ");
    text[id] = run.textContent;
    next();
  })();
})();
</script>
"""
# What a page must show as it is: it ends a script, opens an HTML comment, ends a line of
# JavaScript (U+2028), ends a JSON string, escapes.
HOSTILE = '</script><!-- "q" \\ \u2028 end'
# Known as a secret, and 10 of its characters in a scenario's name: the run's id is masked.
SECRET = "Zq7x9LmP2wRt5vBn8Kc3Yh6D"
RUN_SCENARIO = """\
task: {prompt: x}
solution: [git init -q .]
evaluation:
  gates:
    - {type: command_output_matches, command: %s, pattern: never-printed}
"""


def test_report_runs_files_a_missing_one_is_said_and_those_of_runs_gone_are_removed(
    project: Project, tmp_path: Path
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    # Every run fails a gate whose command, in its reason and its panel, is hostile text.
    scenario = RUN_SCENARIO % json.dumps(f"echo hi # {HOSTILE}")
    names = (f"a-{SECRET[:10]}", "b", "c")
    for name in names:
        project.write(f"scenarios/{name}.yaml", scenario)
    env = {"DEPLOY_TOKEN": SECRET}
    assert project.doit("run", env=env).code == 0
    results = project.results()
    files = results / "report-runs"
    masked = "a-[REDACTED]/oracle/r1"

    def aggregate() -> list[str]:
        reports.aggregate(build_plan(load_project(project.root), Selection()))
        return sorted(p.name for p in files.iterdir())

    def inodes() -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in files.iterdir()}

    with pytest.MonkeyPatch.context() as patch:  # a file and a page a run, as 100 runs are
        patch.setenv("DEPLOY_TOKEN", SECRET)
        patch.setattr(panels, "CHUNK_RUNS", 1)
        patch.setattr(reports, "FIRST_RUNS", 1)
        (files / ".0001.js.k1ll3d.tmp").write_text("llmttPanels(1, ")  # a write killed
        assert aggregate() == ["0000.js", "0001.js", "0002.js"]
        # a file that holds what it should is not written again; one that does not (one cut
        # short, with its first line or without) is
        kept = inodes()
        (files / "0001.js").write_text("llmttPanels(1, ")
        whole = (files / "0002.js").read_text()
        (files / "0002.js").write_text(whole[: whole.index("\n") + 40])
        aggregate()
        again = inodes()
        assert again["0000.js"] == kept["0000.js"]
        assert again["0001.js"] != kept["0001.js"] and again["0002.js"] != kept["0002.js"]
        assert (files / "0002.js").read_text() == whole
        # another llmtt (its redaction or escaping may differ) writes them all again
        patch.setattr(report_cache, "code_id", lambda: "another llmtt")
        aggregate()
        assert all(inodes()[name] != again[name] for name in again)
        assert list(run_panels(results)) == [masked, "b/oracle/r1", "c/oracle/r1"]
        assert SECRET[:8] not in "".join(p.read_text() for p in files.iterdir())
        (files / "0001.js").unlink()
        (files / "0002.js").write_text(  # a file of another report
            (files / "0002.js").read_text().replace('", {', 'x", {')
        )
        signature = (files / "0000.js").read_text().split()[4]
        probe = results / "said.html"
        said_script = SAID.replace("SECRET_RUN", json.dumps(masked))
        probe.write_text((results / "report.html").read_text().replace("</body>", said_script))
        # opened at a link that is no URI escape: the page's script still runs to its end
        dom = chromium(
            tmp_path, "--virtual-time-budget=20000", "--dump-dom", probe.as_uri() + "#50%25%E0"
        )
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert 'data-ready="1"' in dom.stdout
        found = re.search(r'data-said="([^"]*)"', dom.stdout)
        assert found, dom.stdout[-3000:]
        said, seen, text, asked = json.loads(html_unescape(found[1]))
        assert seen[0] == "runs 1–1 of 3" and "b/oracle/r1" in seen[1] and masked not in seen[1]
        assert seen[2] == "runs 1–1 of 1 kept by the filter (3 in all)"
        assert "total_commands 1" in said[masked]
        assert said["b/oracle/r1"].startswith("This run's panel is in report-runs/0001.js beside")
        assert said["c/oracle/r1"].startswith("report-runs/0002.js is not the file this report")
        # the hostile text, as it is: in a panel read from its file, in a line the script made
        assert HOSTILE in text[masked] and HOSTILE in seen[1]
        # each file asked for with its signature: no cache serves another version's
        assert any(name.endswith(f"/report-runs/0000.js?{signature}") for name in asked), asked
        # runs leave the plan: their files go
        for name in names[1:]:
            (project.root / f"scenarios/{name}.yaml").unlink()
        assert aggregate() == ["0000.js"]
        for name in names[1:]:
            project.write(f"scenarios/{name}.yaml", scenario)
        assert aggregate() == ["0000.js", "0001.js", "0002.js"]
    # `doit clean` over fewer runs than wrote the files (its targets name 0000.js alone) removes
    # every file, a killed write's and the folder
    (files / ".0002.js.k1ll3d.tmp").write_text("llmttPanels(2, ")
    clean = project.doit("clean", env=env)
    assert clean.code == 0 and not files.exists(), clean.out + clean.err
