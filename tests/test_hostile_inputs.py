"""Hostile and broken input, refused with one located line and a non-zero exit, never a traceback.

Issue 10, items 5, 7 and 8: YAML nested past any sane depth, self-referencing aliases and alias
bombs; deeply nested TOML; paths that lead out of the project (`..`, absolute, symbolic links);
variant files that are folders, pipes or missing; fixture link loops and fixtures holding pipes
or sockets; `command = []`; two runs of the plan with one folder; a judge that cannot run; and
doit variables that select nothing or are misspelt.

`CASES` run in-process through `llmtt validate` (what `doit` loads too); `DOIT_CASES` and
`DOIT_FILE_CASES` through a real `doit` subprocess. Each case asserts the file, line and field
(where there is one) and the words of the message, that nothing prints a traceback, and the
exit code. The tests after them inject faults while `doit run` works, and hand `llmtt check`
and `llmtt bless` results that cover less than the baseline, or nothing.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DOIT, TOOL_TOML

from llmtt.commands.main import main as llmtt_main

LLMTT = str(Path(DOIT).parent / "llmtt")
S, T, R = "scenarios/s.yaml", "llmtt.toml", "rubrics/r.yaml"
OK = "task: {prompt: Do it.}\n"  # a valid line 1 of a scenario
RUBRIC = "criteria:\n  - {id: ok, weight: 1, description: done}\n"
JUDGED = OK + "evaluation:\n  judge: {enabled: true, rubric: r.yaml}\n"
DEEP = "nested deeper than 64 levels"
OUT = "leads outside the project folder"
MAX_NODES = 100_000  # values a YAML file may expand to (llmtt.spec.loading.MAX_NODES)


@dataclass(frozen=True)
class Special:
    """A file system entry other than a text file: a link, pipe, socket or folder."""

    kind: str
    target: str = ""


FIFO, SOCKET, FOLDER = Special("fifo"), Special("socket"), Special("folder")


def link(target: str) -> Special:
    """A symbolic link to `target` ({out} stands for a folder beside the project)."""
    return Special("link", target)


Files = dict[str, str | Special]


def flow(n: int) -> str:
    """A flow sequence nested `n` deep."""
    return "[" * n + "]" * n


def block(n: int) -> str:
    """`evaluation:` holding mappings nested `n` deep, one key a line from line 3."""
    return "evaluation:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, n)) + "  " * n + "v\n"


def bomb(levels: int) -> str:
    """Billion laughs: each level an anchored list of nine aliases of the one before."""
    text = "x0: &a0 [" + ", ".join(["lol"] * 9) + "]\n"
    for k in range(1, levels):
        text += f"x{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]\n"
    return text


def toml_deep(n: int) -> str:
    return "[" * n + "]" * n


def variant(dest: str, source: str = "guide.md") -> str:
    """llmtt.toml declaring variant `docs` with one file: the entry is on line 2."""
    return f"[variants.docs.files]\n'{dest}' = '{source}'\n"


def case(
    name: str, files: Files, where: str, line: int | None, field: str | None, *words: str
) -> object:
    return pytest.param(files, where, line, field, words, id=name)


# One case a line: the table reads as a list of what must be refused, and where.
# fmt: off
CASES = [
    # YAML nested past any sane depth (libyaml's composer crashes the process past ~100,000)
    case("yaml-deep-flow-sequence", {S: OK + "tags: " + flow(70)}, S, 2, "tags[0][0]...", DEEP),
    case("yaml-deep-block-mapping", {S: OK + block(70)}, S, 66, "evaluation.k1.k2...", DEEP),
    case("yaml-deep-in-a-rubric", {S: OK, R: "criteria: " + flow(90)}, R, 1, "criteria[0][0]...", DEEP),
    case("yaml-deep-inside-a-gate", {S: OK + "evaluation: {gates: [{type: script, command: " + flow(80) + "}]}"}, S, 2, "evaluation.gates[0]...", DEEP),
    # aliases that contain themselves, and alias bombs (expanded they would take gigabytes)
    case("yaml-alias-to-its-own-sequence", {S: OK + "tags: &t [a, *t]\n"}, S, 2, "tags[1]", "alias *t refers to a node that contains it"),
    case("yaml-alias-to-its-own-mapping", {S: OK + "evaluation: &e {judge: *e}\n"}, S, 2, "evaluation.judge", "alias *e refers to a node that contains it"),
    case("yaml-alias-to-an-ancestor", {S: OK + "setup:\n  commands: &c\n    - [x, *c]\n"}, S, 4, "setup.commands[0][1]", "alias *c refers"),
    case("yaml-alias-bomb-in-a-scenario", {S: OK + bomb(9)}, S, 7, "x5[0]", f"more than {MAX_NODES} values once aliases are expanded"),
    case("yaml-alias-bomb-in-a-rubric", {S: OK, R: bomb(9)}, R, 6, "x5[0]", "once aliases are expanded"),
    case("yaml-alias-wide-bomb", {S: OK + "a: &a [" + "x, " * 999 + "x]\nb: [" + "*a, " * 199 + "*a]\n"}, S, 3, "b[98]", "once aliases are expanded"),
    # TOML nested past what tomllib can read (it recurses)
    case("toml-deep-array", {T: "[matrix]\nagents = " + toml_deep(5000) + "\n"}, T, 2, "matrix.agents", DEEP),
    case("toml-deep-inline-table", {T: "[target]\nbinary = 'git'\nenv = " + "{a = " * 3000 + "'x'" + "}" * 3000 + "\n"}, T, 3, "target.env", DEEP),
    case("toml-deep-after-brackets-in-strings", {T: "[target]\nbinary = '[[[[' # [[[[\n[matrix]\nrepeats = " + toml_deep(5000) + "\n"}, T, 4, "matrix.repeats", DEEP),
    # a command agent with no program
    case("agent-command-empty", {T: "[agents.mine]\ncommand = []\n"}, T, 2, "agents.mine.command", "must start with the agent's program"),
    case("agent-command-empty-program", {T: "[agents.mine]\nfree = true\ncommand = ['', '{prompt}']\n"}, T, 3, "agents.mine.command", "must start with the agent's program"),
    case("agent-command-blank-program", {T: "[agents.mine]\ncommand = ['  ']\n"}, T, 2, "agents.mine.command", "must start with the agent's program"),
    # variant sources: a readable file of the project
    case("variant-source-missing", {T: variant("AGENTS.md")}, T, 2, "variants.docs.files.AGENTS.md", "guide.md does not exist"),
    case("variant-source-is-a-folder", {T: variant("AGENTS.md"), "guide.md": FOLDER}, T, 2, "variants.docs.files.AGENTS.md", "is a folder"),
    case("variant-source-is-a-pipe", {T: variant("AGENTS.md"), "guide.md": FIFO}, T, 2, "variants.docs.files.AGENTS.md", "is not a regular file"),
    case("variant-source-is-a-socket", {T: variant("AGENTS.md"), "guide.md": SOCKET}, T, 2, "variants.docs.files.AGENTS.md", "is not a regular file"),
    case("variant-source-dangling-link", {T: variant("AGENTS.md"), "guide.md": link("gone.md")}, T, 2, "variants.docs.files.AGENTS.md", "does not exist"),
    case("variant-source-dotdot-outside", {T: variant("AGENTS.md", "../outside/guide.md")}, T, 2, "variants.docs.files.AGENTS.md", OUT, "allow_outside"),
    case("variant-source-absolute-outside", {T: variant("AGENTS.md", "{out}/guide.md")}, T, 2, "variants.docs.files.AGENTS.md", OUT),
    case("variant-source-link-outside", {T: variant("AGENTS.md"), "guide.md": link("{out}/guide.md")}, T, 2, "variants.docs.files.AGENTS.md", OUT),
    # variant destinations: relative file paths inside the workspace
    case("variant-dest-absolute", {T: variant("/tmp/AGENTS.md"), "guide.md": "x"}, T, 2, "variants.docs.files./tmp/AGENTS.md", "must be a file path inside the workspace"),
    case("variant-dest-dotdot", {T: variant("../AGENTS.md"), "guide.md": "x"}, T, 2, "variants.docs.files.../AGENTS.md", "without '..'"),
    case("variant-dest-dotdot-inside-a-path", {T: variant("docs/../../AGENTS.md"), "guide.md": "x"}, T, 2, "variants.docs.files.docs/../../AGENTS.md", "without '..'"),
    case("variant-dest-the-workspace-itself", {T: variant("."), "guide.md": "x"}, T, 2, "variants.docs.files..", "must be a file path"),
    case("variant-dest-inline-table", {T: "[variants.docs]\nfiles = { '../../x' = 'guide.md' }\n", "guide.md": "x"}, T, 2, "variants.docs.files.../../x", "without '..'"),
    # fixtures: inside the project, a folder, and nothing in it that cannot be copied
    case("fixture-dotdot-outside", {S: OK + "fixture: ../../outside/fixture\n"}, S, 2, "fixture", OUT),
    case("fixture-absolute-outside", {S: OK + "fixture: {out}/fixture\n"}, S, 2, "fixture", OUT),
    case("fixture-link-outside", {S: OK + "fixture: base\n", "scenarios/base": link("{out}/fixture")}, S, 2, "fixture", OUT),
    case("fixture-link-loop", {S: OK + "fixture: loop\n", "scenarios/loop": link("loop")}, S, 2, "fixture", "is a symbolic link loop"),
    case("fixture-link-loop-of-two", {S: OK + "\nfixture: a\n", "scenarios/a": link("b"), "scenarios/b": link("a")}, S, 3, "fixture", "is a symbolic link loop"),
    case("fixture-dangling-link", {S: OK + "fixture: base\n", "scenarios/base": link("gone")}, S, 2, "fixture", "does not exist"),
    case("fixture-is-a-file", {S: OK + "fixture: base\n", "scenarios/base": "text"}, S, 2, "fixture", "is not a folder"),
    case("fixture-holds-a-pipe", {S: OK + "fixture: base\n", "scenarios/base/README": "x", "scenarios/base/pipe": FIFO}, S, 2, "fixture", "pipe is not a regular file"),
    case("fixture-holds-a-nested-pipe", {S: OK + "fixture: base\n", "scenarios/base/a/b/pipe": FIFO}, S, 2, "fixture", "a/b/pipe is not a regular file"),
    case("fixture-holds-a-socket", {S: OK + "fixture: base\n", "scenarios/base/sock": SOCKET}, S, 2, "fixture", "sock is not a regular file"),
    # rubrics and templates: inside the project
    case("rubric-dotdot-outside", {S: OK + "evaluation:\n  judge: {enabled: true, rubric: ../outside/r.yaml}\n"}, S, 3, "evaluation.judge.rubric", OUT),
    case("rubric-absolute-outside", {S: OK + "evaluation:\n  judge: {enabled: true, rubric: '{out}/r.yaml'}\n"}, S, 3, "evaluation.judge.rubric", OUT),
    case("rubric-link-outside", {S: JUDGED, R: link("{out}/r.yaml")}, S, 3, "evaluation.judge.rubric", OUT),
    case("unused-rubric-link-outside", {S: OK, "rubrics/spare.yaml": link("{out}/r.yaml")}, "rubrics/spare.yaml", None, None, OUT),
    case("template-link-outside", {S: OK, "templates/report.md.j2": link("{out}/t.j2")}, "templates/report.md.j2", None, None, OUT),
    case("paths-templates-outside", {T: "[paths]\ntemplates = '../outside'\n"}, T, 2, "paths.templates", OUT),
    case("paths-rubrics-absolute", {T: "[paths]\nrubrics = '{out}'\n"}, T, 2, "paths.rubrics", OUT),
    case("paths-scenarios-outside", {T: "[paths]\nresults = 'out'\nscenarios = '../outside'\n"}, T, 3, "paths.scenarios", OUT),
    # two runs of the plan with one folder
    case("matrix-agent-twice", {T: "[matrix]\nagents = ['oracle', 'oracle']\n"}, T, 2, "matrix.agents[1]", "'oracle' is listed twice"),
    case("matrix-models-one-folder", {T: "[matrix]\nagents = ['litellm']\nmodels = ['a/b', 'a_b']\n"}, T, 3, "matrix.models[1]", "'a/b' and 'a_b' make the same run folder name 'a_b'"),
    case("matrix-agents-one-folder", {T: "[agents.'my agent']\ncommand = ['x']\n[agents.my_agent]\ncommand = ['y']\n[matrix]\nagents = ['my agent', 'my_agent']\n"}, T, 6, "matrix.agents[1]", "make the same run folder name 'my_agent'"),
    case("scenario-matrix-variant-twice", {T: "[variants.v]\nfiles = {}\n", S: OK + "matrix:\n  variants: [v, none, v]\n"}, S, 3, "matrix.variants[2]", "'v' is listed twice"),
    # NUL bytes, which no command line or file name can hold (Python refused to start such a
    # command with a traceback; a C string would have run it cut at the NUL)
    case("nul-in-a-solution-command", {S: OK + 'solution: [ls, "echo a\\0; rm -rf b"]\n'}, S, 2, "solution[1]", "contains a NUL byte (character 7)"),
    case("nul-in-a-setup-command", {S: OK + 'setup:\n  commands: ["true\\0"]\n'}, S, 3, "setup.commands[0]", "contains a NUL byte"),
    case("nul-in-a-gate-command", {S: OK + 'evaluation:\n  gates:\n    - {type: command_succeeds, command: "test\\0"}\n'}, S, 4, "evaluation.gates[0].command", "contains a NUL byte", "(gate 1)"),
    case("nul-in-a-script-command", {S: OK + 'scripts:\n  post: [{command: "a\\0"}]\n'}, S, 3, "scripts.post[0].command", "contains a NUL byte"),
    case("nul-in-a-gate-path", {S: OK + 'evaluation:\n  gates: [{type: file_exists, path: "a\\0b"}]\n'}, S, 3, "evaluation.gates[0].path", "contains a NUL byte"),
    case("nul-in-a-check-path", {S: OK + 'evaluation:\n  gates: [{type: check, check: "file_exists:/a\\0"}]\n'}, S, 3, "evaluation.gates[0].check", "contains a NUL byte"),
    case("nul-in-the-health-check", {T: '[target]\nhealth_check = "git\\u0000 --version"\n'}, T, 2, "target.health_check", "contains a NUL byte"),
    # a judge that cannot run
    case("judge-scripted-in-a-scenario", {S: OK + "evaluation:\n  judge: {enabled: true, rubric: r.yaml, model: scripted}\n", R: RUBRIC}, S, 3, "evaluation.judge.model", "cannot be the scripted model"),
    case("judge-scripted-in-llmtt-toml", {T: "[run]\ntimeout_secs = 9\n[judge]\nmodel = 'scripted'\n", S: JUDGED, R: RUBRIC}, T, 4, "judge.model", "cannot be the scripted model"),
]
# fmt: on


def build(tmp_path: Path, files: Files) -> Path:
    """A project at tmp_path/proj (llmtt.toml and scenarios/s.yaml valid unless `files` says
    otherwise) and, beside it, tmp_path/outside with a guide, a fixture, a rubric, a template."""
    out = tmp_path / "outside"
    (out / "fixture").mkdir(parents=True)
    (out / "fixture" / "README").write_text("outside\n")
    (out / "guide.md").write_text("secret guidance\n")
    (out / "r.yaml").write_text(RUBRIC)
    (out / "t.j2").write_text("{{ summary }}\n")
    root = tmp_path / "proj"
    (root / "scenarios").mkdir(parents=True)
    files = {T: "", S: OK, **files}
    if isinstance(files[T], str) and "[target]" not in files[T]:
        files[T] += "\n" + TOOL_TOML  # after the case's own lines: their numbers stay
    for rel, entry in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, str):
            path.write_text(entry.replace("{out}", str(out)))
        elif entry.kind == "link":
            path.symlink_to(entry.target.replace("{out}", str(out)))
        elif entry.kind == "fifo":
            os.mkfifo(path)
        elif entry.kind == "socket":
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(path))  # the socket file stays after the socket is closed
        else:
            path.mkdir()
    return root


def expect_line(root: Path, where: str, line: int | None, field: str | None) -> str:
    """The start of the message line: `path:line: field: `."""
    text = str(root / where) + (f":{line}" if line is not None else "") + ": "
    return text + (f"{field}: " if field else "")


@pytest.mark.parametrize(("files", "where", "line", "field", "words"), CASES)
def test_hostile_input_is_one_located_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: Files,
    where: str,
    line: int | None,
    field: str | None,
    words: tuple[str, ...],
) -> None:
    root = build(tmp_path, files)
    started = time.monotonic()
    code = llmtt_main(["validate", str(root)])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 2, out + err
    prefix = expect_line(root, where, line, field)
    found = [m for m in err.splitlines() if prefix in m and all(w in m for w in words)]
    assert found, f"wanted {prefix!r} with {list(words)}; got:\n{err}"
    assert took < 5, f"refusing took {took:.1f} s"


def test_the_well_formed_counterparts_load(tmp_path: Path) -> None:
    """What the cases refuse, done right: aliases that contain nothing of themselves, a link loop
    *inside* a fixture (copied as a link, never followed), and paths outside the project with
    `[paths] allow_outside = true`."""
    root = build(
        tmp_path,
        {
            T: "[paths]\nallow_outside = true\n" + variant("docs/AGENTS.md", "{out}/guide.md"),
            S: OK + "tags: &t [a, b]\nsetup: {commands: *t}\nfixture: base\n"
            "evaluation:\n  judge: {enabled: true, rubric: '{out}/r.yaml', model: m}\n",
            "scenarios/base/loop": link("loop"),
            "scenarios/base/up": link(".."),
            "scenarios/t.yaml": OK + "fixture: ../../outside/fixture\nmatrix: {variants: [docs]}\n",
        },
    )
    assert llmtt_main(["validate", str(root)]) == 0


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def doit(root: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    """A real `doit` in `root`, without the caller's LLMTT_ variables or API keys."""
    base = {
        k: v for k, v in os.environ.items() if not k.startswith("LLMTT_") and "API_KEY" not in k
    }
    proc = subprocess.run(
        [DOIT, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


SELECTION_TOML = "[variants.docs]\nfiles = {}\n" + TOOL_TOML
ALPHA = "task: {prompt: a}\ntags: [smoke]\ntier: 1\nsolution: ['true']\n"
BETA = "task: {prompt: b}\ntier: 2\nsolution: ['true']\n"
VARIABLES = "scenario, tag, tier, agent, model, variant, repeats, budget"


@pytest.fixture(scope="module")
def selected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A project with two passing runs and its reports, shared by the selection cases."""
    root = tmp_path_factory.mktemp("selection") / "proj"
    (root / "scenarios").mkdir(parents=True)
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / T).write_text(SELECTION_TOML)
    (root / "scenarios/alpha.yaml").write_text(ALPHA)
    (root / "scenarios/beta.yaml").write_text(BETA)
    first = doit(root, "run")
    assert first.code == 0, first.text
    yield root


# One case a line: the doit command line, then the words stderr must hold.
# fmt: off
DOIT_CASES = [
    pytest.param(["run", "scenario=alpah"], ["llmtt: scenario=alpah: no such scenario; did you mean 'alpha'? (scenarios: alpha, beta)"], id="scenario-typo"),
    pytest.param(["run", "scenario=alpha,alpah"], ["scenario=alpah: no such scenario"], id="scenario-typo-in-a-list"),
    pytest.param(["run", "agnt=oracle"], ["unknown variable agnt=oracle; did you mean 'agent'?", VARIABLES], id="variable-misspelt"),
    pytest.param(["run", "Scenario=alpha"], ["unknown variable Scenario=alpha; did you mean 'scenario'?"], id="variable-capitalised"),
    pytest.param(["run", "budgett=1"], ["unknown variable budgett=1; did you mean 'budget'?"], id="variable-budget-misspelt"),
    pytest.param(["run", "tag=smok"], ["tag=smok: no scenario has this tag; did you mean 'smoke'? (tags: smoke)"], id="tag-matches-nothing"),
    pytest.param(["run", "tier=0"], ["tier=0: no scenario is of tier 0 or below (tiers: 1, 2)"], id="tier-matches-nothing"),
    pytest.param(["run", "tier=3-9"], ["tier=3-9: no scenario is of a tier from 3 to 9 (tiers: 1, 2)"], id="tier-range-matches-nothing"),
    pytest.param(["run", "tier=2-1"], ["tier= takes a whole number N (tiers 0 to N) or a range A-B"], id="tier-range-backwards"),
    pytest.param(["run", "agent=oracel"], ["agent=oracel: unknown agent 'oracel'; did you mean 'oracle'"], id="agent-matches-nothing"),
    pytest.param(["run", "model=gpt"], ["model=gpt: none of the selected agents (oracle) takes a model"], id="model-used-by-no-run"),
    pytest.param(["run", "variant=doc"], ["variant=doc: no [variants.doc] table in llmtt.toml; did you mean 'docs'?"], id="variant-matches-nothing"),
    pytest.param(["run", "scenario=alpha", "tier=2-2"], ["scenario=alpha tier=2-2: selects no run"], id="values-that-match-nothing-together"),
    pytest.param(["run", "agent=oracle,oracle"], ["agent=oracle,oracle: 'oracle' is listed twice"], id="agent-listed-twice"),
    pytest.param(["run", "agent=litellm", "model=a/b,a_b"], ["model=a/b,a_b: 'a/b' and 'a_b' make the same run folder name 'a_b'"], id="models-one-folder"),
    pytest.param(["info", "nope"], ["llmtt: doit info nope: not a task of this project's runs"], id="info-unknown-task"),
    pytest.param(["info", "scenario=beta", "alpha/oracle/r1"], ["doit info alpha/oracle/r1: not a task of the runs that scenario=beta selects; did you mean 'beta/oracle/r1'?"], id="info-unselected-task"),
    pytest.param(["info", "--no-status", "alpha/oracle/r1:agnt"], ["not a task of this project's runs; did you mean 'alpha/oracle/r1:agent'?"], id="info-misspelt-layer"),
]
# fmt: on


@pytest.mark.parametrize(("args", "words"), DOIT_CASES)
def test_a_selection_that_selects_nothing_fails_and_keeps_the_reports(
    selected: Path, args: list[str], words: list[str]
) -> None:
    reports = selected / "llm-tool-test-results"
    before = {n: (reports / n).read_bytes() for n in ("report.md", "report.json", "junit.xml")}
    ran = doit(selected, *args)
    assert "Traceback" not in ran.text
    assert ran.code == 2, ran.text
    assert len(ran.err.strip().splitlines()) == 1, ran.err  # one line
    for word in words:
        assert word in ran.err, ran.err
    assert {n: (reports / n).read_bytes() for n in before} == before


def test_known_task_names_and_selections_still_work(selected: Path) -> None:
    assert doit(selected, "info", "alpha/oracle/r1").code == 0
    assert doit(selected, "info", "-f", "dodo.py", "alpha/oracle/r1:agent").code == 0
    assert doit(selected, "list", "scenario=beta", "tier=2", "tag=", "budget=1").code == 0


# fmt: off
DOIT_FILE_CASES = [
    pytest.param({T: "[agents.mine]\ncommand = []\n"}, T, 2, "agents.mine.command", "must start with the agent's program", id="command-empty"),
    pytest.param({T: "[matrix]\nagents = ['oracle', 'oracle']\n"}, T, 2, "matrix.agents[1]", "'oracle' is listed twice", id="agents-twice"),
    pytest.param({T: "[matrix]\nagents = ['litellm']\nmodels = ['a/b', 'a_b']\n"}, T, 3, "matrix.models[1]", "make the same run folder name", id="models-one-folder"),
    pytest.param({S: OK + "tags: " + flow(300_000)}, S, 2, "tags[0][0]...", DEEP, id="yaml-past-the-c-composer"),
    pytest.param({S: OK + bomb(10)}, S, 7, "x5[0]", "once aliases are expanded", id="yaml-alias-bomb"),
    pytest.param({T: "[matrix]\nagents = " + toml_deep(100_000) + "\n"}, T, 2, "matrix.agents", DEEP, id="toml-deep"),
    pytest.param({S: OK + "fixture: loop\n", "scenarios/loop": link("loop")}, S, 2, "fixture", "is a symbolic link loop", id="fixture-link-loop"),
    pytest.param({S: OK + "fixture: base\n", "scenarios/base/pipe": FIFO}, S, 2, "fixture", "pipe is not a regular file", id="fixture-pipe"),
    pytest.param({T: variant("AGENTS.md"), "guide.md": FOLDER}, T, 2, "variants.docs.files.AGENTS.md", "is a folder", id="variant-folder"),
    pytest.param({T: variant("AGENTS.md", "../outside/guide.md")}, T, 2, "variants.docs.files.AGENTS.md", OUT, id="variant-outside"),
    pytest.param({S: OK + "evaluation:\n  judge: {enabled: true, rubric: r.yaml, model: scripted}\n", R: RUBRIC}, S, 3, "evaluation.judge.model", "cannot be the scripted model", id="judge-scripted"),
]
# fmt: on


@pytest.mark.parametrize(("files", "where", "line", "field", "words"), DOIT_FILE_CASES)
def test_doit_refuses_a_hostile_project_in_one_line(
    tmp_path: Path, files: Files, where: str, line: int | None, field: str | None, words: str
) -> None:
    root = build(tmp_path, {"dodo.py": "from llmtt.tasks import *  # noqa: F403\n", **files})
    started = time.monotonic()
    ran = doit(root, "list")
    assert time.monotonic() - started < 20
    assert "Traceback" not in ran.text
    assert ran.code == 2, ran.text  # not -11: libyaml's composer never sees the deep file
    assert ran.err.startswith("llmtt: " + expect_line(root, where, line, field)), ran.err
    assert words in ran.err and len(ran.err.strip().splitlines()) == 1, ran.err


def _limit_memory() -> None:
    limit = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_an_alias_bomb_is_refused_fast_and_in_bounded_memory(tmp_path: Path) -> None:
    """Twelve levels of nine: 9**12 (282 billion) values expanded. Refused in well under a
    second under a 1 GiB address-space limit (the old loader took 90 s and 8.6 GB for 8)."""
    root = build(tmp_path, {S: OK + bomb(12)})
    started = time.monotonic()
    proc = subprocess.run(
        [LLMTT, "validate", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
    )
    took = time.monotonic() - started
    assert "Traceback" not in proc.stdout + proc.stderr and "MemoryError" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert f"{root / S}:7: x5[0]: more than {MAX_NODES} values" in proc.stderr
    assert took < 10, f"{took:.1f} s"


def test_an_unreadable_fixture_file_is_a_load_error(tmp_path: Path) -> None:
    """chmod 000 stops no read by root (the tests run as root here), so as root the check runs
    as user `nobody` through setpriv, on a project that user owns; otherwise as ourselves."""
    holder = Path(tempfile.mkdtemp(prefix="llmtt-unreadable-"))
    try:
        holder.chmod(0o755)
        root = build(holder, {S: OK + "fixture: base\n", "scenarios/base/README": "x"})
        secret = root / "scenarios/base/secret.txt"
        secret.write_text("no\n")
        command = [LLMTT, "validate", str(root)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
        env["HOME"] = str(root)
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: cannot drop the privilege")
            for path in [holder, *holder.rglob("*")]:
                os.lchown(path, 65534, 65534)
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        secret.chmod(0)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"{root / S}:2: fixture: " in proc.stderr
        assert "secret.txt cannot be read (permission denied)" in proc.stderr
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def _runtime_project(root: Path, first_solution: str) -> None:
    """Two oracle runs, `a` then `b`, both with the variant `docs` laid in."""
    (root / "scenarios").mkdir(parents=True)
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    # Run `a`'s command breaks the project from inside a run: only an unconfined run can
    # (tests/execution/test_confinement.py proves a confined one cannot).
    (root / T).write_text(
        "[isolation]\nmode = 'none'\n[matrix]\nvariants = ['docs']\n"
        + variant("AGENTS.md")
        + TOOL_TOML
    )
    (root / "guide.md").write_text("guidance\n")
    gate = "evaluation:\n  gates:\n    - {type: file_exists, path: AGENTS.md}\n"
    (root / "scenarios/a.yaml").write_text(
        f"task: {{prompt: a}}\nsolution: [{first_solution!r}]\n" + gate
    )
    (root / "scenarios/b.yaml").write_text("task: {prompt: b}\nsolution: ['true']\n" + gate)


def test_a_variant_file_deleted_at_run_time_fails_that_run_only(tmp_path: Path) -> None:
    """The plan was built with guide.md; run `a` deletes it before run `b` lays it out."""
    root = tmp_path / "proj"
    _runtime_project(root, f"rm {tmp_path / 'proj' / 'guide.md'}")
    ran = doit(root, "run")
    assert "Traceback" not in ran.text
    assert ran.code != 0, ran.text
    assert "variant file 'AGENTS.md'" in ran.text and "guide.md" in ran.text, ran.text
    results = root / "llm-tool-test-results"
    runs = {r["run_id"]: r for r in _report(results)["runs"]}
    assert runs["a/oracle-docs/r1"]["outcome"] == "pass"
    assert runs["b/oracle-docs/r1"]["outcome"] == "error"
    assert "variant file 'AGENTS.md'" in runs["b/oracle-docs/r1"]["outcome_reason"]


def _report(results: Path) -> dict[str, object]:
    import json

    data: dict[str, object] = json.loads((results / "report.json").read_text())
    return data


def _chattr_works(folder: Path) -> bool:
    probe = folder / "probe"
    probe.mkdir()
    try:
        done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, timeout=10)
    except OSError:
        return False
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True, timeout=10)
        probe.rmdir()
    return done.returncode == 0


@pytest.mark.parametrize(
    "fault", ["run-folder-immutable", "results-immutable", "run-folder-a-file"]
)
def test_a_folder_made_unwritable_mid_run_fails_only_what_writes_there(
    tmp_path: Path, fault: str
) -> None:
    """As root no chmod stops a write: the run before `b` makes b's folder or the whole results
    folder immutable (`chattr +i`, where the file system has it) or puts a file in b's place.
    Each task that cannot write fails in one line; the reports stay as they were; once the
    fault is gone, the next `doit run` finishes the rest."""
    immutable = fault.endswith("immutable")
    if immutable and (shutil.which("chattr") is None or not _chattr_works(tmp_path)):
        pytest.skip("no chattr +i on this file system")
    root = tmp_path / "proj"
    _runtime_project(root, "true")
    assert doit(root, "run").code == 0
    results = root / "llm-tool-test-results"
    reports = {n: (results / n).read_bytes() for n in ("report.md", "report.json", "junit.xml")}
    victim = results if fault == "results-immutable" else results / "b"
    breaker = {
        "run-folder-immutable": f"rm -rf {victim} && mkdir {victim} && chattr +i {victim}",
        "results-immutable": f"chattr +i {victim}",
        "run-folder-a-file": f"rm -rf {victim} && echo not a folder > {victim}",
    }[fault]
    a, b = root / "scenarios/a.yaml", root / "scenarios/b.yaml"
    a.write_text(a.read_text().replace("'true'", repr(breaker)))
    b.write_text(b.read_text().replace("{prompt: b}", "{prompt: b again}"))
    try:
        ran = doit(root, "run")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(victim)], capture_output=True, timeout=10)
    assert "Traceback" not in ran.text
    assert ran.code != 0, ran.text
    lines = [m for m in ran.text.splitlines() if m.startswith("llmtt: b/oracle-docs/r1: ")]
    assert any(str(victim) in m for m in lines), ran.text  # one line, naming the file
    assert (results / "a/oracle-docs/r1/result.json").exists()
    assert {n: (results / n).read_bytes() for n in reports} == reports  # intact, not half-written
    if victim.is_file():
        victim.unlink()
    again = doit(root, "run")
    assert again.code == 0, again.text
    assert [r["outcome"] for r in _report(results)["runs"]] == ["pass", "pass"]  # type: ignore[index]


def test_a_judge_without_a_key_is_one_line_and_the_run_waits_in_the_reports(
    tmp_path: Path,
) -> None:
    root = build(
        tmp_path,
        {
            "dodo.py": "from llmtt.tasks import *  # noqa: F403\n",
            S: OK
            + "solution: ['true']\nevaluation:\n  judge: {enabled: true, rubric: r.yaml, model: openai/gpt-4o-mini}\n",
            R: RUBRIC,
        },
    )
    env = {"LLMTT_ENABLED": "1", "HOME": str(tmp_path)}
    ran = doit(root, "run", env=env)
    assert "Traceback" not in ran.text
    assert ran.code != 0, ran.text
    why = "the judge (openai/gpt-4o-mini) cannot run: no API key: set OPENAI_API_KEY"
    assert f"\ns/oracle/r1: the judge did not run: {why}" in ran.text, ran.text
    results = root / "llm-tool-test-results"
    assert json.loads((results / "s/oracle/r1/judge.json").read_text())["skipped"].startswith(why)
    for name in ("report.md", "junit.xml"):
        assert why in (results / name).read_text(), name
    # Without LLMTT_ENABLED=1 the paid judge is not asked either, and says why.
    again = doit(root, "run", env={"HOME": str(tmp_path)})
    assert again.code != 0 and "set LLMTT_ENABLED=1" in again.text, again.text


def _blessed_two_runs(tmp_path: Path) -> Path:
    """A project of two runs, run and blessed."""
    root = tmp_path / "proj"
    (root / "scenarios").mkdir(parents=True)
    (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")
    (root / T).write_text(TOOL_TOML)
    (root / "scenarios/alpha.yaml").write_text(ALPHA)
    (root / "scenarios/beta.yaml").write_text(BETA)
    assert doit(root, "run").code == 0
    assert llmtt_main(["bless", str(root)]) == 0
    return root


def test_check_fails_when_baseline_groups_have_no_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _blessed_two_runs(tmp_path)
    assert llmtt_main(["check", str(root)]) == 0
    assert doit(root, "run", "scenario=alpha").code == 0  # CI ran a part: report.json has alpha
    capsys.readouterr()
    assert llmtt_main(["check", str(root)]) == 1
    out = capsys.readouterr().out
    assert "Every run passed and nothing regressed." in out  # what is there is fine...
    assert (
        "Compared 1 of the 2 groups of llmtt-baseline.json (results of: scenario=alpha); "
        "no finished run of: beta/oracle/-/-." in out
    )
    assert "pass --subset" in out
    assert llmtt_main(["check", "--subset", str(root)]) == 0
    assert "Only the compared groups are checked (--subset)." in capsys.readouterr().out


def test_bless_refuses_a_report_without_finished_runs_and_check_fails_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _blessed_two_runs(tmp_path)
    baseline = (root / "llmtt-baseline.json").read_bytes()
    for name in ("alpha", "beta"):  # every run now fails to start: no finished run
        path = root / f"scenarios/{name}.yaml"
        path.write_text(path.read_text() + "setup: {commands: ['exit 3']}\n")
    assert doit(root, "run").code != 0
    capsys.readouterr()
    assert llmtt_main(["bless", str(root)]) == 2
    err = capsys.readouterr().err
    assert "report.json holds no finished run (pass or fail): nothing to bless" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (root / "llmtt-baseline.json").read_bytes() == baseline
    for name in ("alpha", "beta"):
        (root / f"scenarios/{name}.yaml").unlink()
    assert doit(root, "run").code == 0  # no scenario and no selection: an empty report
    capsys.readouterr()
    assert llmtt_main(["check", str(root)]) == 1
    assert "No run in these results: nothing was checked." in capsys.readouterr().out
