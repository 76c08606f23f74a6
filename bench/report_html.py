"""report.html at 1,000 and 10,000 runs: its size and its first paint in headless Chromium,
for this checkout's llmtt and an earlier one's (`--before`), in one invocation.

    .venv/bin/python bench/report_html.py --before /tmp/llmtt-main [--sizes 1000,10000]

A project of N oracle runs (N/10 scenarios x 10 repeats) is filled without running N agents:
ten runs of one scenario are carried out for real (`doit run`), and their folders are copied to
every run of the big project, each result.json given its run's id and scenario, and
results.jsonl written from them; each run's panel then holds what a run of a dozen commands
shows (a timeline, a failed call with its output, the transcript's end, a session recording).

Each checkout's `aggregate()` writes the reports of the same project (timed twice: the first
fills the report cache its code wants, the second is what an aggregate costs once the cache
is warm), and its report.html (with report-runs/, when it writes that) is copied aside. Then
each page is opened `--times` times, the two checkouts in turn, each time in a new Chromium
process with a new profile (nothing cached): Chromium is driven over its DevTools pipe
(`--remote-debugging-pipe`), the page is navigated to, and once its load event has fired and
the paint entries exist, `performance.getEntriesByType("paint")` gives the first paint and the
first contentful paint (ms from the navigation's start, as the browser's own clock has them:
no probe script is put in the page, so what is measured is the page as written). The load
event's end is taken from the navigation entry. For a checkout that writes report-runs/, the
time to open a run in the middle of the list (its link followed: the panel read from its file
and shown) is measured in the page too.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DOIT = str(Path(sys.executable).parent / "doit")

TOML = """\
[target]
binary = "echo"
command_pattern = '(?<![\\w./-])echo(?![\\w.-])(?:\\s+([a-z][\\w-]*))?'

[matrix]
agents = ["oracle"]
repeats = {repeats}
"""

# A run of about a dozen commands, one of which fails: its panel has a timeline, a failed call
# with its output, a transcript's end and a recording of a few KB.
SCENARIO = """\
name: s{index:04d}
tags: [bench]
task:
  prompt: Write the word {index} to out.txt.
fixture: fixture
solution:
  - echo {index} > out.txt
  - ls -la
  - seq 1 120
  - echo listing
  - cat no-such-file
  - echo again
  - seq 200 260
  - echo status
  - echo {index}
evaluation:
  gates:
    - type: file_contains
      path: out.txt
      substring: "{index}"
"""

KEPT = (
    "result.json",
    "metrics.json",
    "gates.json",
    "events.jsonl",
    "transcript.raw.txt",
    "session.cast",
    "run.json",
    "evaluation.md",
)

AGGREGATE = """
import sys, time
from pathlib import Path
from llmtt.plan.runs import build_plan
from llmtt.report.aggregate import aggregate
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection
root = Path(sys.argv[1])
started = time.perf_counter()
aggregate(build_plan(load_project(root), Selection()))
print(time.perf_counter() - started)
"""


def make_project(root: Path, runs: int) -> None:
    """A project of `runs` oracle runs whose results are there, copied from ten real ones."""
    scenarios = runs // 10
    if root.exists():
        shutil.rmtree(root)
    (root / "scenarios" / "fixture").mkdir(parents=True)
    (root / "scenarios" / "fixture" / "README.md").write_text("bench fixture\n")
    (root / "llmtt.toml").write_text(TOML.format(repeats=10))
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / "scenarios" / "s0000.yaml").write_text(SCENARIO.format(index=0))
    proc = subprocess.run([DOIT, "run", "-n", "2"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"doit run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    results = root / "llm-tool-test-results"
    seed = results / "s0000" / "oracle"
    lines = []
    for index in range(scenarios):
        name = f"s{index:04d}"
        if index:
            (root / "scenarios" / f"{name}.yaml").write_text(SCENARIO.format(index=index))
        for repeat in range(1, 11):
            folder = results / name / "oracle" / f"r{repeat}"
            folder.mkdir(parents=True, exist_ok=True)
            for file in KEPT:
                if index:
                    shutil.copyfile(seed / f"r{repeat}" / file, folder / file)
            record = json.loads((folder / "result.json").read_text())
            record["run_id"], record["scenario"] = f"{name}/oracle/r{repeat}", name
            text = json.dumps(record)
            (folder / "result.json").write_text(text)
            lines.append(text)
    (results / "results.jsonl").write_text("\n".join(lines) + "\n")
    for name in ("results.db", "results.db-wal", "results.db-shm"):
        (results / name).unlink(missing_ok=True)


def aggregate(code: Path, root: Path) -> float:
    """Seconds of one aggregate of `root` by the llmtt in `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run(
        [sys.executable, "-c", AGGREGATE, str(root.resolve())],
        env=env,
        cwd=root,  # not this checkout: `-c` puts the working folder first on the path
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"aggregate with {code} failed:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.split()[-1])


class Chromium:
    """A headless Chromium driven over its DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, profile: Path) -> None:
        exe = shutil.which("chromium")
        if exe is None:
            raise SystemExit("chromium is missing")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        os.set_inheritable(to_browser, True)
        os.set_inheritable(from_browser, True)
        # Chromium reads commands on fd 3 and writes answers on fd 4.
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1280,900",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=functools.partial(_on_3_and_4, to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None, page: bool = False) -> Any:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message()
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self.events.append(answer)

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        text, _, self._buffer = self._buffer.partition(b"\0")
        return dict(json.loads(text))

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            page=True,
        )
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        self.proc.wait(timeout=30)
        os.close(self._write)
        os.close(self._read)


def _on_3_and_4(first: int, second: int) -> None:
    """In the child: `first` as fd 3 and `second` as fd 4 (copied out of the way first, as
    either may be 3 or 4 already)."""
    first, second = os.dup(first), os.dup(second)
    os.dup2(first, 3)
    os.dup2(second, 4)


PAINTS = """new Promise(function (done) {
  function look() {
    var nav = performance.getEntriesByType("navigation")[0];
    var paints = performance.getEntriesByType("paint");
    if (nav && nav.loadEventEnd > 0 && paints.length >= 2) {
      var out = {load: nav.loadEventEnd, dom: nav.domContentLoadedEventEnd};
      paints.forEach(function (p) { out[p.name] = p.startTime; });
      done(out);
    } else { setTimeout(look, 20); }
  }
  look();
})"""

# A run in the middle of the list, opened by its link: ms until its panel (its metrics) shows.
OPEN_RUN = """new Promise(function (done) {
  var rows = JSON.parse(document.getElementById("run-data").textContent).rows;
  var id = rows[Math.floor(rows.length / 2)][0], started = performance.now();
  location.hash = "#" + id;
  function look() {
    var run = document.getElementById(id);
    if (run && run.querySelector(".metrics")) { done(performance.now() - started); }
    else if (performance.now() - started > 20000) { done(null); }
    else { setTimeout(look, 5); }
  }
  look();
})"""


def open_page(page: Path, runs_folder: bool) -> dict[str, Any]:
    """The paint and load times of `page` in a new Chromium; with `runs_folder`, the time to
    open a run too."""
    with tempfile.TemporaryDirectory() as profile:
        browser = Chromium(Path(profile))
        try:
            browser.call("Page.enable", page=True)
            browser.call("Page.navigate", {"url": page.as_uri()}, page=True)
            figures = dict(browser.evaluate(PAINTS))
            if runs_folder:
                figures["open_run"] = browser.evaluate(OPEN_RUN)
        finally:
            browser.close()
    return figures


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of earlier llmtt")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench/out/report_html"))
    args = parser.parse_args()
    after = Path(__file__).resolve().parents[1]
    codes = {"before": args.before.resolve(), "after": after}
    for runs in (int(s) for s in args.sizes.split(",")):
        root = args.out / f"project-{runs}"
        make_project(root, runs)
        results = root / "llm-tool-test-results"
        pages: dict[str, Path] = {}
        row: dict[str, Any] = {"runs": runs}
        for label, code in codes.items():
            shutil.rmtree(results / "report-runs", ignore_errors=True)
            cold, warm = aggregate(code, root), aggregate(code, root)
            kept = args.out / f"{label}-{runs}"
            shutil.rmtree(kept, ignore_errors=True)
            kept.mkdir(parents=True)
            shutil.copyfile(results / "report.html", kept / "report.html")
            if (results / "report-runs").is_dir():
                shutil.copytree(results / "report-runs", kept / "report-runs")
            pages[label] = kept / "report.html"
            row[label] = {
                "aggregate_secs": [round(cold, 2), round(warm, 2)],
                "report_html_bytes": (kept / "report.html").stat().st_size,
                "report_runs_bytes": size(kept / "report-runs")
                if (kept / "report-runs").is_dir()
                else 0,
            }
        seen: dict[str, list[dict[str, Any]]] = {label: [] for label in codes}
        for _ in range(args.times):
            for label in codes:
                folder = (pages[label].parent / "report-runs").is_dir()
                seen[label].append(open_page(pages[label], folder))
        for label in codes:
            for name in ("first-paint", "first-contentful-paint", "load", "open_run"):
                values = [s[name] for s in seen[label] if s.get(name) is not None]
                if values:
                    row[label][f"{name}_ms"] = round(statistics.median(values))
                    row[label][f"{name}_ms_range"] = [round(min(values)), round(max(values))]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
