"""A guidance file (AGENTS.md, CLAUDE.md, a variant's file) read against the tool: its size in
tokens, the subcommands and options it names that the tool's help does not know, and its fenced
shell examples, run in a fresh copy of a scenario's fixture in the run sandbox.

A fence whose info string is bash, sh, shell, zsh or console is an example; `console` (or a
block whose lines start with `$ `) runs only its prompt lines. A fence marked `skip` or
`no-run` after its language (```` ```bash skip ````) is read but not run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from llmtt.evaluation.shell.target_commands import TargetMatcher, target_commands
from llmtt.lint import helptext
from llmtt.lint.findings import Finding

SHELLS = frozenset({"bash", "sh", "shell", "zsh", "console", "shell-session"})
_FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^\s`]*)([^`]*)$")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_PROMPT = re.compile(r"^\s*[$%]\s+")


@dataclass(frozen=True)
class Block:
    """A fenced block: its language, whether it runs, and its command lines with the file's
    line number of each."""

    language: str
    runs: bool
    start: int  # the fence's line
    lines: tuple[tuple[int, str], ...]

    def script(self) -> str:
        """The block as one bash script, one line each (so an error's line maps back)."""
        return "\n".join(text for _, text in self.lines)


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        marker, language = fence.group(2), fence.group(3).lower()
        flags = fence.group(4).lower().split()
        body: list[tuple[int, str]] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            body.append((j + 1, lines[j]))
            j += 1
        prompted = language == "console" or any(_PROMPT.match(t) for _, t in body)
        if prompted:  # only the prompt lines are commands; the rest is their output
            body = [(n, _PROMPT.sub("", t, count=1)) for n, t in body if _PROMPT.match(t)]
        out.append(
            Block(
                language,
                language in SHELLS and not {"skip", "no-run"} & set(flags),
                i + 1,
                tuple(body),
            )
        )
        i = j + 1
    return out


def command_lines(text: str) -> Iterator[tuple[int, str]]:
    """Every line that may name the tool: those of shell or unlabelled blocks, and inline code
    spans outside blocks; with its line number."""
    inside: set[int] = set()
    for block in blocks(text):
        span = range(block.start, block.start + len(block.lines) + 2)
        inside.update(span)
        if block.language in SHELLS or not block.language:
            for number, line in block.lines:
                if line.strip() and not line.lstrip().startswith("#"):
                    yield number, line
    for number, line in enumerate(text.splitlines(), start=1):
        if number in inside or _FENCE.match(line):
            continue
        for match in _INLINE.finditer(line):
            yield number, match.group(1)


def mention_findings(
    text: str,
    file: str,
    matcher: TargetMatcher,
    known: Callable[[str], bool],
    options: Callable[[str | None], set[str]],
    has_subcommands: bool,
) -> list[Finding]:
    """Subcommands and options the guidance uses that the tool does not know. `known(sub)`
    says whether the tool has that subcommand (it may probe it); `options(sub)` the options
    its help and the tool's own name."""
    found: list[Finding] = []
    seen: set[tuple[str, str | None]] = set()
    for number, line in command_lines(text):
        for command in target_commands(line, None, matcher):
            sub = command.subcommand
            if has_subcommands and sub is not None and not known(sub):
                if ("command", sub) not in seen:
                    seen.add(("command", sub))
                    tool = matcher.binary or "the tool"
                    found.append(
                        Finding(
                            "unknown-command",
                            f"names `{tool} {sub}`, which the tool does not have (its help lists "
                            f"no such subcommand, and `{tool} {sub} --help` fails)",
                            file=file,
                            line=number,
                        )
                    )
                continue
            sub = sub if has_subcommands else None
            allowed = options(None) | (options(sub) if sub else set())
            for option in _options_of(command.command):
                if _known_option(option, allowed) or (option, sub) in seen:
                    continue
                seen.add((option, sub))
                what = f"`{sub}`" if sub else "the tool"
                found.append(
                    Finding(
                        "unknown-flag",
                        f"uses {option}, which the help of {what} does not name",
                        file=file,
                        line=number,
                        subcommand=sub,
                    )
                )
    return found


def _options_of(command: str) -> list[str]:
    """The options a command line gives (before `--`), without their `=value`."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    out = []
    for word in words[1:]:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not word[1:].isdigit():
            out.append(word.split("=", 1)[0])
    return out


def _known_option(option: str, allowed: set[str]) -> bool:
    """Whether the help names `option`, or each letter of a cluster of short ones (`-am`)."""
    if option in allowed:
        return True
    if not option.startswith("--") and len(option) > 2:
        letters = option[1:]
        if all(f"-{c}" in allowed for c in letters):
            return True
        return f"-{letters[0]}" in allowed  # `-mmessage`: an option with its value attached
    return False


def size_finding(text: str, file: str, bound: int) -> Finding | None:
    """A finding when the guidance is longer than `bound` tokens."""
    tokens = helptext.approximate_tokens(text)
    if tokens <= bound:
        return None
    return Finding(
        "guidance-size",
        f"about {tokens} tokens (bound {bound}): every run pays for it on every turn",
        file=file,
    )
