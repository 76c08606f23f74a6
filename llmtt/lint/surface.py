"""The target tool seen from outside, as an agent meets it: its `--help` and every
subcommand's, and what it does when called wrongly or with no terminal.

Each invocation runs confined as a run's setup is (`llmtt.execution.isolation`: the system's
programs read-only, no network, none of the user's files), in a scratch folder of its own, with
stdin an open pipe that never gives input: a tool that prompts waits there, as it would under
an agent, and is stopped at the timeout. $PAGER and $EDITOR name small scripts that leave a mark,
so a tool that starts either though nothing is a terminal is seen doing so.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from llmtt.execution.isolation import confined
from llmtt.execution.workspace import prepare
from llmtt.lint import helptext
from llmtt.lint.findings import Finding
from llmtt.process.sandbox.bwrap import Sandbox, View
from llmtt.process.shell import run_shell

# Words no tool knows, for the wrong invocations.
NO_SUCH_OPTION = "--llmtt-no-such-option"
NO_SUCH_COMMAND = "llmtt-no-such-command"
# What a wrong invocation's output says when it helps: the mistake, the usage, a suggestion.
_HINT_WORDS = (
    "usage",
    "help",
    "unknown",
    "unrecognized",
    "unrecognised",
    "invalid",
    "no such",
    "did you mean",
    "not found",
    "not a",
    "missing",
    "required",
    "expected",
    "error",
)
_MARKS = ".llmtt-lint"
_SCRIPT = '#!/bin/sh\n: > "$HOME/{marks}/{name}-started"\n{then}\n'


@dataclass(frozen=True)
class Bounds:
    """The limits `llmtt lint` holds the tool to."""

    timeout_secs: float = 5.0
    max_help_tokens: int = 2000
    max_error_tokens: int = 500
    max_subcommands: int = 100
    jobs: int = 4


@dataclass(frozen=True)
class Probe:
    """What one invocation of the tool did."""

    words: tuple[str, ...]
    exit_code: int | None  # None: stopped at the timeout, or killed by a signal
    output: str  # stdout and stderr, interleaved
    timed_out: bool
    pager: bool
    editor: bool

    @property
    def tokens(self) -> int:
        """About how long its output is, in tokens."""
        return helptext.approximate_tokens(self.output)

    def as_json(self) -> dict[str, object]:
        """The probe as lint.json records it."""
        return {
            "argv": list(self.words),
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "tokens": self.tokens,
        }


class Prober:
    """Runs the tool's invocations, each confined (unless `base` is None: unconfined on
    purpose) in a fresh scratch folder under `scratch`."""

    def __init__(
        self,
        program: str,
        env: dict[str, str],
        base: Sandbox | None,
        scratch: Path,
        timeout_secs: float,
    ) -> None:
        self.program = program
        self.name = Path(program).name
        self.env = env
        self.base = base
        self.scratch = scratch
        self.timeout_secs = timeout_secs

    def run(self, words: tuple[str, ...], *, stdin_open: bool = True) -> Probe:
        """Run the tool with `words`; stdin an open pipe (else /dev/null)."""
        folder = self.scratch / f"p{abs(hash((words, stdin_open))):x}"
        ws = prepare(folder, None, {})
        marks = ws.home / _MARKS
        marks.mkdir()
        scripts = {}
        for name, then in (("pager", "cat"), ("editor", "exit 1")):
            script = marks / name
            script.write_text(_SCRIPT.format(marks=_MARKS, name=name, then=then))
            script.chmod(0o755)
            scripts[name] = str(script)
        pager, editor = scripts["pager"], scripts["editor"]
        env = ws.env(
            {"PAGER": pager, "GIT_PAGER": pager, "MANPAGER": pager},
            {"EDITOR": editor, "VISUAL": editor, "GIT_EDITOR": editor},
            self.env,
        )
        # A process substitution that never writes: the tool's stdin is open and silent (the
        # sleep ends with the command's process group).
        source = " < <(exec sleep 86400)" if stdin_open else " < /dev/null"
        command = shlex.join([self.program, *words]) + source
        view = View(cwd=ws.workspace, writable=(ws.workspace, ws.home), tmp=ws.tmp)
        with confined(self.base, view) as confine:
            done = run_shell(
                command,
                cwd=ws.workspace,
                env=env,
                timeout_secs=self.timeout_secs,
                combined=True,
                confine=confine,
            )
        return Probe(
            words,
            done.exit_code,
            done.stdout,
            done.timed_out,
            (marks / "pager-started").exists(),
            (marks / "editor-started").exists(),
        )


@dataclass
class Surface:
    """What the probes learnt of one tool: its subcommands' help texts and options."""

    binary: str
    name: str
    top_help: str
    helps: dict[str, str]  # subcommand -> its help text ("" when it gives none)
    options: dict[str | None, set[str]]  # subcommand (None: the tool) -> options it names
    record: dict[str, object]
    findings: list[Finding]

    def knows(self, subcommand: str) -> bool:
        """Whether `subcommand` is one the tool was seen to have."""
        return subcommand in self.helps


def read_surface(
    prober: Prober,
    binary: str,
    bounds: Bounds,
    only: tuple[str, ...] = (),
) -> Surface:
    """Probe the tool and each of its subcommands (`only`: just those); every finding made."""
    name = Path(binary).name
    findings: list[Finding] = []
    top, top_from = _help(prober, ())
    listed = helptext.subcommands(top.output if top_from else "")
    chosen = [s for s in listed if not only or s in only]
    chosen += [s for s in only if s not in chosen]  # named by the user, though not listed
    chosen = chosen[: bounds.max_subcommands]

    def finding(check: str, message: str, sub: str | None) -> None:
        findings.append(Finding(check, message, target=name, subcommand=sub))

    if top_from is None:
        finding("help-missing", "`--help`, `-h` and `help` all fail or print nothing", None)
    wrong_top = [(NO_SUCH_OPTION,)] + ([(NO_SUCH_COMMAND,)] if listed else [])
    with ThreadPoolExecutor(max_workers=bounds.jobs) as pool:
        top_wrong = list(pool.map(prober.run, wrong_top))
        per_sub = list(pool.map(lambda s: _subcommand(prober, name, s, bounds), chosen))
    _input_findings(top, None, finding, prober)
    _help_findings(top.output if top_from else "", None, bounds, finding, check_examples=False)
    for probe in top_wrong:
        _wrong_call_findings(probe, None, bounds, finding, prober)
    helps: dict[str, str] = {}
    options: dict[str | None, set[str]] = {None: helptext.options(top.output)}
    subs_record = []
    for sub, (help_probe, help_from, wrong) in zip(chosen, per_sub, strict=True):
        text = help_probe.output if help_from else ""
        helps[sub] = text
        options[sub] = helptext.options(text)
        if help_from is None:
            finding("help-missing", f"`{name} {sub} --help`, `-h` and `help {sub}` all fail", sub)
        _input_findings(help_probe, sub, finding, prober)
        _help_findings(text, sub, bounds, finding, check_examples=True)
        for probe in wrong:
            _wrong_call_findings(probe, sub, bounds, finding, prober)
        subs_record.append(
            {
                "name": sub,
                "help": " ".join(help_from) if help_from else None,
                "help_tokens": helptext.approximate_tokens(text),
                "example": helptext.has_example(text),
                "machine_output": helptext.has_machine_output(text),
                "options": len(options[sub]),
                "probes": [p.as_json() for p in (help_probe, *wrong)],
            }
        )
    record: dict[str, object] = {
        "binary": binary,
        "help": " ".join(top_from) if top_from else None,
        "help_tokens": top.tokens,
        "subcommands": subs_record,
        "probes": [p.as_json() for p in (top, *top_wrong)],
    }
    return Surface(binary, name, top.output, helps, options, record, findings)


def _help(prober: Prober, words: tuple[str, ...]) -> tuple[Probe, tuple[str, ...] | None]:
    """The first of `--help`, `-h` and `help ...` that exits 0 with some text, and which it
    was (None: none did; the probe is then `--help`'s)."""
    forms = [(*words, "--help"), (*words, "-h")]
    if words:
        forms.append(("help", *words))
    first: Probe | None = None
    for form in forms:
        probe = prober.run(form)
        first = first or probe
        if probe.exit_code == 0 and probe.output.strip():
            return probe, form
    assert first is not None
    return first, None


def _subcommand(
    prober: Prober, name: str, sub: str, bounds: Bounds
) -> tuple[Probe, tuple[str, ...] | None, list[Probe]]:
    """A subcommand's help and its wrong invocations: an unknown option, and run bare when its
    usage shows a required argument."""
    help_probe, help_from = _help(prober, (sub,))
    wrong = [prober.run((sub, NO_SUCH_OPTION))]
    if help_from and helptext.requires_argument(help_probe.output, [name, sub]):
        wrong.append(prober.run((sub,)))
    return help_probe, help_from, wrong


Report = Callable[[str, str, str | None], None]


def _input_findings(probe: Probe, sub: str | None, finding: Report, prober: Prober) -> None:
    """Pager, editor and waiting for input, as seen on `probe`."""
    shown = "`" + " ".join((prober.name, *probe.words)) + "`"
    if probe.pager:
        finding("pager", f"{shown} started $PAGER though its output was no terminal", sub)
    if probe.editor:
        finding("editor", f"{shown} opened $EDITOR though stdin was no terminal", sub)
    if probe.timed_out:
        again = prober.run(probe.words, stdin_open=False)
        if again.timed_out:
            finding(
                "waits-for-input",
                f"{shown} did not end within {prober.timeout_secs:g} s, even with stdin at its "
                "end: an agent's call would hang",
                sub,
            )
        else:
            finding(
                "waits-for-input",
                f"{shown} waited for input on stdin (a prompt?) until stopped after "
                f"{prober.timeout_secs:g} s; with stdin at its end it exited "
                f"{again.exit_code}",
                sub,
            )


def _help_findings(
    text: str, sub: str | None, bounds: Bounds, finding: Report, *, check_examples: bool
) -> None:
    if not text:
        return
    if check_examples and not helptext.has_example(text):
        finding("help-example", "its help shows no example", sub)
    if check_examples and not helptext.has_machine_output(text):
        finding("machine-output", "its help offers no machine-readable output (--json, ...)", sub)
    tokens = helptext.approximate_tokens(text)
    if tokens > bounds.max_help_tokens:
        finding(
            "help-length",
            f"its help is about {tokens} tokens (bound {bounds.max_help_tokens}): an agent "
            "reads it all",
            sub,
        )


def _wrong_call_findings(
    probe: Probe, sub: str | None, bounds: Bounds, finding: Report, prober: Prober
) -> None:
    """Exit code, hint and length of a wrong invocation's answer."""
    shown = "`" + " ".join((prober.name, *probe.words)) + "`"
    what = "with no argument" if probe.words == (sub,) else "(a wrong invocation)"
    _input_findings(probe, sub, finding, prober)
    if probe.timed_out:
        return
    if probe.exit_code == 0:
        finding("wrong-call-exit", f"{shown} {what} exited 0: an agent takes it for success", sub)
    text = probe.output.strip().lower()
    if not text:
        finding("wrong-call-hint", f"{shown} {what} printed nothing", sub)
    elif not any(word in text for word in (*_HINT_WORDS, probe.words[-1].lower())):
        finding(
            "wrong-call-hint",
            f"{shown} {what} names neither the mistake nor the usage: {_first_line(text)!r}",
            sub,
        )
    if probe.tokens > bounds.max_error_tokens:
        finding(
            "error-length",
            f"{shown} answered with about {probe.tokens} tokens (bound {bounds.max_error_tokens})",
            sub,
        )


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
