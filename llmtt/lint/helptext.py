"""Reading a tool's `--help`: the subcommands it lists, the options it knows, whether it shows an
example or a machine-readable output, and the arguments its usage line requires.

The layouts are those `llmtt init` reads (click, cobra, clap: a "Commands:" heading), argparse's
`{a,b,c}` choices, and git's (commands indented under headings of their own words). Everything
here is plain text in, plain values out: the probing itself is `llmtt.lint.surface`.
"""

from __future__ import annotations

import re

_SUBCOMMAND = re.compile(r"^\s{1,8}([a-z][a-z0-9-]{1,30})\*?(?:,\s*[a-z][\w-]*)*(?:\s{2,}|\s*$)")
_SECTION = re.compile(r"^\s*(?:available\s+)?(?:sub)?commands?\s*:?\s*$", re.IGNORECASE)
# argparse lists its subparsers as `{init,validate,...}` under "positional arguments".
_CHOICES = re.compile(r"^\s{1,8}\{([a-z][\w-]*(?:,[a-z][\w-]*)+)\}")
# git's layout: a command, two spaces or more, its description; under a heading in plain words.
_LISTED = re.compile(r"^ {2,8}([a-z][a-z0-9-]{1,30}) {2,}\S")
# Headings whose entries are arguments or options, never commands.
_NOT_COMMANDS = re.compile(r"argument|option|flag|usage|environment|example", re.IGNORECASE)
# Words a "Commands:" list holds that are no command of the tool's own.
NOT_SUBCOMMANDS = frozenset({"help", "completion", "version"})
_OPTION = re.compile(r"(?<![\w-])(--\[no-\][A-Za-z0-9][\w-]*|--[A-Za-z0-9][\w-]*|-[A-Za-z0-9])")
# A machine-readable output: JSON or JSON lines, CSV/TSV, git's porcelain, NUL-ended records.
_MACHINE = re.compile(
    r"--json\b|--jsonl\b|--ndjson\b|--nl\b|--csv\b|--tsv\b|--porcelain\b|"
    r"--(?:format|output|output-format)[= ][^\n]*\bjson\b|-o\s+json\b|\bjson\b",
    re.IGNORECASE,
)
# An example: a heading or sentence that says so, or a command line shown after a `$` prompt.
_EXAMPLE = re.compile(r"\bexamples?\b|\be\.g\.|^\s*\$\s+\S", re.IGNORECASE | re.MULTILINE)
_USAGE = re.compile(r"^\s*(?:usage|or)\s*:\s*(.*)$", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"<[^<>\s]+>|\b[A-Z][A-Z0-9_]{1,}\b")


def listed_subcommands(help_text: str) -> list[str]:
    """The subcommands a `--help` lists under a "Commands:" heading (click, cobra and clap
    style), in order, without `help`, `completion` and `version`."""
    found: list[str] = []
    in_section = False
    for line in help_text.splitlines():
        if _SECTION.match(line):
            in_section = True
            continue
        if not in_section:
            continue
        if line.strip() and not line[:1].isspace():
            in_section = False  # the next heading
            continue
        match = _SUBCOMMAND.match(line)
        if match and match.group(1) not in NOT_SUBCOMMANDS and match.group(1) not in found:
            found.append(match.group(1))
    return found


def subcommands(help_text: str) -> list[str]:
    """Every subcommand a `--help` lists: under a "Commands:" heading, else in argparse's
    `{a,b}` choices, else (git) indented `name  description` lines under headings that are
    not about arguments or options. Empty for a tool without subcommands."""
    found = listed_subcommands(help_text)
    if found:
        return found
    for line in help_text.splitlines():
        choices = _CHOICES.match(line)
        if choices:
            return [c for c in choices.group(1).split(",") if c not in NOT_SUBCOMMANDS]
    heading = ""
    for line in help_text.splitlines():
        if line.strip() and not line[:1].isspace():
            heading = line
            continue
        match = _LISTED.match(line)
        if match and heading and not _NOT_COMMANDS.search(heading):
            name = match.group(1)
            if name not in NOT_SUBCOMMANDS and name not in found:
                found.append(name)
    return found


def options(help_text: str) -> set[str]:
    """The options a help text names (`--json`, `-m`); git's `--[no-]x` gives both forms."""
    out: set[str] = set()
    for match in _OPTION.finditer(help_text):
        option = match.group(1)
        if option.startswith("--[no-]"):
            name = option.removeprefix("--[no-]")
            out |= {f"--{name}", f"--no-{name}"}
        else:
            out.add(option)
    return out


def has_example(help_text: str) -> bool:
    """Whether the help shows an example: it says "example" (or "e.g."), or shows a command
    after a `$` prompt."""
    return _EXAMPLE.search(help_text) is not None


def has_machine_output(help_text: str) -> bool:
    """Whether the help offers a machine-readable output (`--json`, `--format json`, `--csv`,
    `--porcelain`, or any mention of JSON)."""
    return _MACHINE.search(help_text) is not None


def requires_argument(help_text: str, words: list[str]) -> bool:
    """Whether the usage line of the command `words` (e.g. ["tool", "add"]) shows an argument
    outside brackets (`<path>`, `PATH`): then running it bare is a wrong invocation."""
    for line in help_text.splitlines()[:40]:
        match = _USAGE.match(line)
        if not match:
            continue
        rest = match.group(1)
        at = _after(rest, words)
        if at is None and len(words) > 1:  # the program's name may differ from the binary's
            at = _after(rest, words[1:])
        if at is None:
            continue
        required = _outside_brackets(rest[at:])
        if any(
            _PLACEHOLDER.fullmatch(w) and w not in ("OPTIONS", "COMMAND", "ARGS")
            for w in required.split()
        ):
            return True
    return False


def _after(usage: str, words: list[str]) -> int | None:
    """Where the usage text continues after the command's own words, or None if it is
    another command's usage."""
    at = 0
    for word in words:
        match = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", usage[at:])
        if match is None:
            return None
        at += match.end()
    return at


def _outside_brackets(text: str) -> str:
    """`text` without what stands inside [...], (...) or {...} (optional or grouped parts)."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char in "[({":
            depth += 1
        elif char in "])}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(char)
    return "".join(out).replace("...", " ")


def approximate_tokens(text: str) -> int:
    """About how many tokens `text` is for a model: one per 4 characters, the rule of thumb
    OpenAI and Anthropic give for English text (code and other languages run denser); no
    tokenizer is called, so the number is the same everywhere and costs nothing."""
    return (len(text) + 3) // 4
