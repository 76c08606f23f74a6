"""The aggregate keeps each run's report row and panel (llmtt/report/cache.py): a report made from
what it kept equals one made afresh; a run whose result.json is written again gets a new panel
and only it; a secret known only later is masked in what was kept before; a damaged cache is
left aside and made again."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project, run_panels

from llmtt.plan.runs import build_plan
from llmtt.redaction import MASK
from llmtt.report import aggregate as reports
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

TOKEN = "Zq7x9LmP2wRt5vBn8Kc3Yh6D"  # no key shape: masked only once a variable holds it
SCENARIO = """\
task: {prompt: x}
solution: [git init -q ., 'git comit', 'echo said-%s']
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""


def suite(project: Project, scenarios: int = 3, said: str = "hello") -> None:
    project.write("llmtt.toml", GIT_TOML + "\n[matrix]\nrepeats = 2\n")
    for index in range(scenarios):
        project.write(f"scenarios/s{index}.yaml", SCENARIO % said)
    ran = project.doit("run", "-n", "2")
    assert ran.code == 0, ran.out + ran.err


def aggregate(project: Project, env: dict[str, str] | None = None) -> tuple[str, str]:
    """report.html (with its runs' panels) and report.json made again, their time of making
    left out."""
    (project.results() / "report.html").unlink()
    ran = project.doit("run", "aggregate", env=env)
    assert ran.code == 0 and ran.executed() == ["aggregate"], ran.out + ran.err
    html = project.report_html()
    report = json.loads((project.results() / "report.json").read_text())
    report.pop("generated_at")
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", "", html), json.dumps(report)


def cache(project: Project) -> Path:
    return project.results() / ".llmtt-cache" / "report-runs.db"


def kept(project: Project) -> dict[str, str]:
    with sqlite3.connect(cache(project)) as conn:
        return dict(conn.execute("SELECT run_id, panel FROM runs").fetchall())


def test_a_report_from_the_kept_panels_equals_one_made_afresh(project: Project) -> None:
    suite(project)
    assert len(kept(project)) == 6
    from_cache = aggregate(project)
    cache(project).unlink()
    afresh = aggregate(project)
    assert from_cache == afresh
    assert "$ git comit" in afresh[0] and "said-hello" in afresh[0]
    assert len(kept(project)) == 6


def test_only_a_run_whose_result_is_written_again_gets_a_new_panel(project: Project) -> None:
    suite(project)
    run = project.results() / "s0/oracle/r1"
    other = project.results() / "s1/oracle/r1"
    for folder in (run, other):  # what the panel shows, changed under the cache
        events = folder / "events.jsonl"
        events.write_text(events.read_text().replace("git comit", "git cmmit"))
    html, _ = aggregate(project)
    assert "git cmmit" not in html  # kept: neither result.json was written again
    result = run / "result.json"
    result.write_text(result.read_text())  # written again, as its task does
    html, _ = aggregate(project)
    assert html.count('<li class="failed">$ git cmmit</li>') == 1  # that run's panel only
    assert "git cmmit" in kept(project)["s0/oracle/r1"]


def test_a_secret_known_only_later_is_masked_in_the_panels_kept(project: Project) -> None:
    suite(project, said=TOKEN)
    html, report = aggregate(project)
    assert TOKEN in html and TOKEN in "".join(kept(project).values())  # not known as a secret
    html, report = aggregate(project, env={"DEPLOY_TOKEN": TOKEN})
    assert TOKEN[:10] not in html and TOKEN[-10:] not in html and f"said-{MASK}" in html
    assert TOKEN[:10] not in cache(project).read_bytes().decode("utf-8", "replace")
    assert len(kept(project)) == 6


def test_a_damaged_cache_is_left_aside_and_made_again(project: Project) -> None:
    suite(project)
    expected = aggregate(project)
    cache(project).write_bytes(b"not a database, but a file written over it\n" * 100)
    assert aggregate(project) == expected
    assert aggregate(project) == expected
    assert len(kept(project)) == 6


def test_a_panel_template_of_the_projects_own_renders_the_panels_and_its_edit_renders_them_again(
    project: Project,
) -> None:
    suite(project, scenarios=2)
    own = "<details>{{ r['run_id'] }}: %s {{ d['failed_calls'] | length }} failed</details>\n"
    project.write("templates/report-run.html.j2", own % "v1")
    ran = project.doit("run")
    assert ran.executed() == ["aggregate"], ran.out + ran.err  # the template is in its key
    html = project.report_html()
    assert "<details>s0/oracle/r2: v1 1 failed</details>" in html
    assert "said-hello" not in html  # llmtt's own panel is not there
    project.write("templates/report-run.html.j2", own % "v2")
    ran = project.doit("run")
    assert ran.executed() == ["aggregate"], ran.out + ran.err
    html = project.report_html()
    assert html.count(": v2 1 failed</details>") == 4 and ": v1 " not in html
    kept_panels = kept_html(project)
    assert len(kept_panels) == 4 and all(": v2 " in panel for panel in kept_panels.values())


def test_a_page_template_of_the_projects_own_still_reads_each_runs_panel(
    project: Project,
) -> None:
    suite(project, scenarios=1)
    project.write(
        "templates/report.html.j2",
        "{% for r in runs %}{{ r.run_id }}={{ details[r.run_id].failed_calls[0].command }};"
        "{% endfor %}{{ details | length }}|{{ run_panels }}",
    )
    ran = project.doit("run")
    assert ran.code == 0 and ran.executed() == ["aggregate"], ran.out + ran.err
    html = (project.results() / "report.html").read_text()
    page, _, shown = html.partition("|")
    assert page == "s0/oracle/r1=git comit;s0/oracle/r2=git comit;2"
    # a page written when report.html held the runs' panels still shows them all
    assert shown == "".join(run_panels(project.results()).values())
    assert shown.count("PASS</span> s0/oracle/r") == 2 and "$ git comit" in shown
    assert shown.count('<script type="application/json" class="cast">') == 2
    # past 1,000 runs such a page names each run's recording instead of holding it, as then
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports, "EVERY_CAST_UP_TO", 1)
        reports.aggregate(build_plan(load_project(project.root), Selection()))
    shown = (project.results() / "report.html").read_text().partition("|")[2]
    assert 'class="cast"' not in shown and "$ git comit" in shown
    assert shown.count("session: session.cast in the run's folder") == 2
    assert len(shown) < len("".join(run_panels(project.results()).values()))


def kept_html(project: Project) -> dict[str, str]:
    with sqlite3.connect(cache(project)) as conn:
        return dict(conn.execute("SELECT run_id, html FROM runs").fetchall())


def test_templates_are_kept_compiled_and_a_place_that_cannot_hold_them_costs_only_the_compile(
    project: Project,
) -> None:
    suite(project, scenarios=1)
    compiled = project.results() / ".llmtt-cache" / "templates"
    kinds = {p.parent.name.split("-")[0]: p for p in compiled.glob("*/*.cache")}
    # evaluation.md, report.md; report.html, a run's panel, the session player it includes
    assert set(kinds) == {"text", "html"} and len(list(compiled.glob("*/*.cache"))) == 5
    for folder in compiled.iterdir():  # another llmtt's, or a damaged one
        for kept_file in folder.iterdir():
            kept_file.write_bytes(b"j2 not bytecode")
    project.write("templates/evaluation.md.j2", "own {{ run.run_id }}\n")
    ran = project.doit("run")
    assert ran.code == 0, ran.out + ran.err
    assert (project.results() / "s0/oracle/r1/evaluation.md").read_text() == "own s0/oracle/r1\n"
    shutil.rmtree(compiled)
    compiled.write_text("in the way")  # nothing can be kept there now
    project.write("templates/evaluation.md.j2", "own again {{ run.run_id }}\n")
    ran = project.doit("run")
    assert ran.code == 0, ran.out + ran.err
    assert (project.results() / "s0/oracle/r2/evaluation.md").read_text() == (
        "own again s0/oracle/r2\n"
    )


def test_a_damaged_salt_or_secrets_hash_makes_the_cache_again_and_it_serves_after(
    project: Project,
) -> None:
    suite(project)
    expected = aggregate(project)
    for key, value in (("salt", "not hex at all"), ("secrets", "0" * 64)):
        with sqlite3.connect(cache(project)) as conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
            conn.execute("UPDATE runs SET html = 'stale'")  # what the check must not serve
        assert aggregate(project) == expected, key
        with sqlite3.connect(cache(project)) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            html = [r[0] for r in conn.execute("SELECT html FROM runs")]
        assert len(html) == 6 and "stale" not in html, key
        assert len(meta["salt"]) == 32 and meta["secrets"] != "0" * 64, key


def test_a_secret_that_is_not_utf8_leaves_the_cache_aside_and_shows_nothing_of_itself(
    project: Project,
) -> None:
    """The secrets' hash cannot be made (a variable's bytes are not UTF-8): the aggregate makes
    every panel without the cache, writes none of it, and no trace of the thread's failure,
    which would quote the secret, reaches the terminal."""
    suite(project)
    expected = aggregate(project)
    secret = "abcdefgh\udcffijklmnopqrst"  # the raw byte 0xff, as os.environ shows it
    before = kept(project)
    html, report = aggregate(project, env={"DEPLOY_TOKEN": secret})
    (project.results() / "report.html").unlink()
    ran = project.doit("run", "aggregate", env={"DEPLOY_TOKEN": secret})
    assert ran.code == 0 and ran.executed() == ["aggregate"], ran.out + ran.err
    assert "Traceback" not in ran.err and "ijklmnop" not in ran.out + ran.err
    assert (html, report) == expected
    assert kept(project) == before  # neither served nor written over
