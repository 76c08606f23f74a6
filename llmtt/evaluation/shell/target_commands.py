"""Target commands in a tool call's shell line, each with its exit code where it is certain.

The rules are docs/metrics.md's "Target commands" section; this module is their one home.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import regex

from llmtt.errors import ConfigError
from llmtt.evaluation.shell.lexer import ShellSyntaxError
from llmtt.evaluation.shell.parser import commands, parse
from llmtt.evaluation.shell.syntax import (
    AndOr,
    Command,
    Compound,
    Pipeline,
    ShellScript,
    Simple,
    Word,
)

if TYPE_CHECKING:
    from llmtt.spec.config import TargetSpec
    from llmtt.spec.project import Project
    from llmtt.spec.scenario import LoadedScenario

PATTERN_TIMEOUT_SECS = 1.0  # one match of the user's command_pattern against one segment
_SUBCOMMAND = re.compile(r"[A-Za-z][\w:-]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_NON_BLANK = re.compile(r"\S+")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# Commands after which nothing in the line is certain to have run as written.
_FLOW = frozenset({"exit", "return", "logout", "trap", "eval", "source", "."})
# Redirections whose file may fail to open: bash then reports 1 without running the command.
_FILE_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "&>", "&>>"})
_QUIET_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
# Global options that take the next word as their value, per target (for the subcommand).
_VALUE_OPTIONS = {
    "git": frozenset(
        {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"}
    ),
}


@dataclass(frozen=True)
class TargetCommand:
    """One invocation of the target in a tool call's line."""

    command: str  # the segment, as written
    normalised: str
    subcommand: str | None
    exit_code: int | None  # None: unknown
    help: bool
    line: str = ""  # the whole tool-call line it stands in


@dataclass(frozen=True)
class _Wrapper:
    """A command that runs the command after its options (`sudo git status`)."""

    values: frozenset[str]  # options whose value is the next word
    passes: Callable[[int], bool]  # whether an exit code is certainly the wrapped command's
    operands: int = 0  # words between the options and the command (timeout's duration)
    assignments: bool = False  # NAME=value words may precede the command (env, sudo)


def _always(code: int) -> bool:
    return True


def _never(code: int) -> bool:
    return False


def _not_125(code: int) -> bool:
    return code != 125  # the wrapper's own failure (env, nice, nohup, stdbuf)


_WRAPPERS = {
    "env": _Wrapper(frozenset({"-u", "-C", "-S", "--unset", "--chdir"}), _not_125, 0, True),
    "time": _Wrapper(frozenset({"-f", "-o", "--format", "--output"}), _always),
    "command": _Wrapper(frozenset(), _always),
    "exec": _Wrapper(frozenset({"-a"}), _always),
    "nohup": _Wrapper(frozenset(), _not_125),
    "nice": _Wrapper(frozenset({"-n", "--adjustment"}), _not_125),
    "stdbuf": _Wrapper(frozenset({"-i", "-o", "-e"}), _not_125),
    # sudo's own failures (refused, no password) exit 1 like many commands do.
    "sudo": _Wrapper(
        frozenset({"-u", "-g", "-p", "-C", "-D", "-R", "-T", "-U"}),
        lambda code: code == 0,
        0,
        True,
    ),
    # 124: timed out; 125: timeout failed; 137: killed after -k.
    "timeout": _Wrapper(
        frozenset({"-s", "-k", "--signal", "--kill-after"}),
        lambda code: code not in (124, 125, 137),
        1,
    ),
    # xargs runs its command any number of times and sums up their exits in its own codes.
    "xargs": _Wrapper(
        frozenset(
            {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"}
            | {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars"}
            | {"--max-lines", "--process-slot-var"}
        ),
        _never,
    ),
}


@dataclass(frozen=True)
class TargetMatcher:
    """What makes a command a target command: the binary, or the user's command_pattern."""

    binary: str | None  # the command word's last path component must equal this
    pattern: str | None = None  # replaces `binary` when given; group 1 = subcommand
    timeout_secs: float = PATTERN_TIMEOUT_SECS
    origin: Path | None = None  # where the pattern is written, for error messages
    origin_line: int | None = None
    origin_field: str = "target.command_pattern"

    @classmethod
    def of(
        cls,
        target: TargetSpec,
        *,
        origin: Path | None = None,
        origin_line: int | None = None,
        origin_field: str = "target.command_pattern",
    ) -> TargetMatcher | None:
        """The matcher of a target; None when it names neither binary nor pattern."""
        if not target.binary and not target.command_pattern:
            return None
        binary = Path(target.binary).name if target.binary else None
        pattern = target.command_pattern or None
        return cls(binary, pattern, PATTERN_TIMEOUT_SECS, origin, origin_line, origin_field)

    def hit(self, command: Simple, index: int) -> tuple[bool, str | None]:
        """Whether word `index` of `command` starts a target command, and its subcommand."""
        word = command.words[index]
        if self.pattern is None:
            if word.value.rsplit("/", 1)[-1] != self.binary or not word.value:
                return False, None
            operand = first_operand(command.words, index)
            return True, operand if operand and _SUBCOMMAND.fullmatch(operand) else None
        compiled = self._compiled()
        text = command.text.replace("\\\n", "  ")  # same length: offsets still hold
        offset = word.start - command.start
        starts = [offset]
        if "/" in word.text:  # `./bin/tool`: also from the last path component
            starts.append(offset + word.text.rindex("/") + 1)
        for start in starts:
            try:
                match = compiled.match(text[start:], timeout=self.timeout_secs)
            except TimeoutError:
                raise self._error(
                    f"/{self.pattern}/ took longer than {self.timeout_secs:g} s on the command "
                    f"{_shorten(command.text)!r}: it backtracks without end; rewrite it without "
                    "nested repetition (e.g. `(a+)+`), or remove it to match the binary's name"
                ) from None
            if match is not None:
                group = match.group(1) if compiled.groups else None
                return True, group or None
        return False, None

    def _compiled(self) -> regex.Pattern[str]:
        assert self.pattern is not None
        try:
            return _compile(self.pattern)
        except regex.error as exc:  # checked with `re` at load time; `regex` differs at edges
            raise self._error(f"/{self.pattern}/ cannot be used: {exc}") from None

    def _error(self, message: str) -> ConfigError:
        return ConfigError.one(self.origin, message, line=self.origin_line, field=self.origin_field)


@functools.cache
def _compile(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def matcher_for(project: Project, scenario: LoadedScenario) -> TargetMatcher | None:
    """The matcher of a scenario's target, knowing where its command_pattern is written."""
    from llmtt.spec.config import CONFIG_FILE, TargetSpec
    from llmtt.spec.loading import line_of

    target = project.target_for(scenario)
    chosen = scenario.spec.target
    if isinstance(chosen, TargetSpec) and "command_pattern" in chosen.model_fields_set:
        line = line_of(scenario.lines, ("target", "command_pattern"))
        return TargetMatcher.of(target, origin=scenario.path, origin_line=line)
    loc: tuple[str, ...] = ("target", "command_pattern")
    if (
        isinstance(chosen, str)
        and "command_pattern" in project.config.targets[chosen].model_fields_set
    ):
        loc = ("targets", chosen, "command_pattern")
    line = line_of(project.config_lines, loc)
    return TargetMatcher.of(
        target, origin=project.root / CONFIG_FILE, origin_line=line, origin_field=".".join(loc)
    )


def first_operand(words: tuple[Word, ...], index: int) -> str | None:
    """The first word after `words[index]` that is not an option or an option's value."""
    takes_value = _VALUE_OPTIONS.get(words[index].value.rsplit("/", 1)[-1], frozenset())
    i = index + 1
    while i < len(words):
        value = words[i].value
        if value == "--":
            return words[i + 1].value if i + 1 < len(words) else None
        if not value.startswith("-") or value == "-":
            return value
        i += 2 if value in takes_value else 1
    return None


def target_commands(
    line: str, exit_code: int | None, matcher: TargetMatcher
) -> list[TargetCommand]:
    """The target commands of one tool call's line, in order (docs/metrics.md has the rules).

    The line's `exit_code` goes to a target command only where it is certainly its own: the
    line's last and-or chain (unless `&` ends it) gets it; in that chain, a lone pipeline gets
    it, an `&&`-only chain that exited 0 gives 0 to each pipeline, an `||`-only chain that
    exited non-zero gives it to its last pipeline; in a pipeline, the last command gets it
    (under pipefail, 0 gives every command 0); `!` turns non-zero into 0; subshells and groups
    pass it to their own list; a wrapper passes it unless it may be the wrapper's own; a
    shell's `-c` string is a line of its own. Everything else is None: earlier chains, mixed
    chains, substitutions, bodies of if/while/for/case, exit 1 with a file redirection, every
    command of a line holding exit/return/trap/eval/source/exec/a function definition or
    errexit with a non-zero exit, and a line the lexer cannot read.
    """
    try:
        script = parse(line)
    except ShellSyntaxError:
        script, exit_code = rough_split(line), None
    walk = _Walk(matcher, line)
    walk.script(script, walk.certain(script, exit_code))
    return walk.found


def rough_split(line: str) -> ShellScript:
    """A line the lexer cannot read, cut at every `;`, `&`, `|` and newline wherever they
    stand (quoted or not), each piece's words split at white space."""
    items = []
    for piece in re.finditer(r"[^;&|\n]+", line):
        words = []
        for m in _NON_BLANK.finditer(line, piece.start(), piece.end()):
            value = m.group().strip("\"'(){}`")
            if value:  # a lone `(` or `}` is no word
                words.append(Word(m.group(), value, m.start(), m.end(), False))
        text = piece.group().strip()
        if not words:
            continue
        start = piece.start() + piece.group().index(text[0])
        split = next((i for i, w in enumerate(words) if not _ASSIGNMENT.match(w.text)), len(words))
        simple = Simple(tuple(words[:split]), tuple(words[split:]), (), text, start)
        items.append(AndOr((Pipeline((simple,), False),), (), False))
    return ShellScript(tuple(items))


@dataclass
class _Walk:
    """One line's walk: its target commands, found in order."""

    matcher: TargetMatcher
    line: str
    found: list[TargetCommand] = field(default_factory=list)
    pipefail: bool = False

    def certain(self, script: ShellScript, code: int | None) -> int | None:
        """The line's exit code, or None when something in the line makes it uncertain whose
        it is: a command that ends or redirects the flow, a function definition, or
        errexit (`set -e`) with a non-zero exit. Notes pipefail for the pipelines."""
        for command in commands(script):
            if isinstance(command, Compound):
                if command.kind == "function":
                    return None
                continue
            name = command.words[0].value if command.words else ""
            if name in _FLOW or (name == "exec" and len(command.words) > 1):
                return None
            if name == "set":
                errexit, pipefail = _set_options(command.words[1:])
                self.pipefail |= pipefail
                if errexit and code != 0:
                    return None
        return code

    def script(self, script: ShellScript, code: int | None) -> None:
        last = len(script.items) - 1
        for i, item in enumerate(script.items):
            self.and_or(item, code if i == last and not item.background else None)

    def and_or(self, item: AndOr, code: int | None) -> None:
        codes: list[int | None] = [None] * len(item.pipelines)
        if code is not None:
            if len(codes) == 1:
                codes[0] = code
            elif code == 0 and set(item.operators) == {"&&"}:
                codes = [0] * len(codes)  # every link ran and succeeded
            elif code != 0 and set(item.operators) == {"||"}:
                codes[-1] = code  # every link ran and failed; the last one with this code
        for pipeline, known in zip(item.pipelines, codes, strict=True):
            self.pipeline(pipeline, known)

    def pipeline(self, pipeline: Pipeline, code: int | None) -> None:
        if pipeline.negated and code is not None:
            code = 0 if code != 0 else None
        commands = pipeline.commands
        if self.pipefail and len(commands) > 1:
            codes: list[int | None] = [0 if code == 0 else None] * len(commands)
        else:
            codes = [None] * len(commands)
            codes[-1] = code
        for command, known in zip(commands, codes, strict=True):
            self.command(command, known)

    def command(self, command: Command, code: int | None) -> None:
        if code == 1 and any(
            r.op in _FILE_REDIRECTS and r.target.value not in _QUIET_FILES
            for r in command.redirects
        ):
            code = None  # the redirection's file may be what failed
        if isinstance(command, Simple):
            for word in command.assignments:
                self.substitutions(word)
            self.simple(command, code)
            for word in command.words + tuple(r.target for r in command.redirects):
                self.substitutions(word)
            return
        for word in command.words:
            self.substitutions(word)
        for body in command.bodies:
            # A subshell's or group's status is its list's; other compounds hide whose it is.
            self.script(body, code if command.kind in ("(", "{") else None)
        for redirect in command.redirects:
            self.substitutions(redirect.target)

    def substitutions(self, word: Word) -> None:
        for sub in word.substitutions:
            self.script(sub, None)

    def simple(self, command: Simple, code: int | None) -> None:
        words = command.words
        i = 0
        while i < len(words):
            is_target, subcommand = self.matcher.hit(command, i)
            if is_target:
                self.found.append(_target(command, i, subcommand, code, self.line))
                return
            name = words[i].value.rsplit("/", 1)[-1]
            if name in _SHELLS:
                self.shell_string(command, i, code)
                return
            wrapper = _WRAPPERS.get(name)
            if wrapper is None:
                return
            if code is not None and not wrapper.passes(code):
                code = None
            i = _wrapped(words, i, name, wrapper)

    def shell_string(self, command: Simple, index: int, code: int | None) -> None:
        """`bash -c 'git status && git log'`: the string is a line of its own."""
        found = _shell_string(command.words, index)
        if found is None:
            return
        text, errexit, pipefail = found
        try:
            script = parse(text)
        except ShellSyntaxError:
            script, code = rough_split(text), None
        inner = _Walk(self.matcher, self.line, pipefail=pipefail)
        inner.script(script, inner.certain(script, None if errexit and code != 0 else code))
        self.found.extend(inner.found)


def _target(
    command: Simple, index: int, subcommand: str | None, code: int | None, line: str
) -> TargetCommand:
    arguments = []
    for word in command.words[index + 1 :]:
        if word.value == "--":
            break
        arguments.append(word.value)
    help_ = (
        "--help" in arguments
        or "-h" in arguments
        or subcommand == "help"
        or first_operand(command.words, index) == "help"
    )
    text = command.text.replace("\\\n", " ")
    return TargetCommand(text, normalise(text), subcommand, code, help_, line)


def normalise(command: str) -> str:
    """Collapse white space."""
    return " ".join(command.split())


def _wrapped(words: tuple[Word, ...], index: int, name: str, wrapper: _Wrapper) -> int:
    """The index of the command word a wrapper runs (len(words) when there is none)."""
    i = index + 1
    while i < len(words):
        value = words[i].value
        if value == "--":
            i += 1
            break
        if wrapper.assignments and _ASSIGNMENT.match(value):
            i += 1
        elif value.startswith("-") and value != "-":
            if name == "command" and value in ("-v", "-V"):
                return len(words)  # `command -v git` looks git up; it does not run it
            i += 2 if value in wrapper.values else 1
        else:
            break
    return i + wrapper.operands


def _shell_string(words: tuple[Word, ...], index: int) -> tuple[str, bool, bool] | None:
    """The command string of `sh -c STRING` (with errexit, pipefail), or None."""
    errexit = pipefail = False
    i = index + 1
    while i < len(words):
        value = words[i].value
        if value in ("-o", "+o") and i + 1 < len(words):
            option = words[i + 1].value
            errexit |= value == "-o" and option == "errexit"
            pipefail |= value == "-o" and option == "pipefail"
            i += 2
            continue
        if not value.startswith("-") or value.startswith("--"):
            return None  # a script file, or a long option this reading does not know
        errexit |= "e" in value[1:]
        if "c" in value[1:]:
            return (words[i + 1].value, errexit, pipefail) if i + 1 < len(words) else None
        i += 1
    return None


def _set_options(words: tuple[Word, ...]) -> tuple[bool, bool]:
    """Whether `set WORDS` turns on errexit, and pipefail."""
    errexit = pipefail = False
    values = [w.value for w in words]
    for i, value in enumerate(values):
        if value.startswith("-") and not value.startswith("--"):
            errexit |= "e" in value[1:]
            if "o" in value[1:] and i + 1 < len(values):
                errexit |= values[i + 1] == "errexit"
                pipefail |= values[i + 1] == "pipefail"
    return errexit, pipefail


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
