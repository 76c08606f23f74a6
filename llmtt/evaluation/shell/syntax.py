"""The pieces of a shell command line: words and tokens (what the lexer reads) and the tree the
parser builds of them (scripts, and-or chains, pipelines, simple and compound commands). Data
only: the lexer and the parser both build on it, neither on the other's types."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    """One word of a line: as written, and its value with quotes and escapes removed."""

    text: str
    value: str  # expansions ($x, $(…), ${…}) are kept as written
    start: int  # offsets in the source the word was read from
    end: int
    plain: bool  # no quote, escape or expansion: may be a reserved word such as `if` or `{`
    substitutions: tuple[ShellScript, ...] = ()


@dataclass(frozen=True)
class Token:
    """A word, an operator, a redirection operator, a newline or the end of the line."""

    kind: str  # "word", "op", "redirect", "newline", "end"
    text: str  # for a redirection, the operator without its file descriptor
    start: int
    end: int
    word: Word | None = None


@dataclass(frozen=True)
class Redirect:
    """`>`, `2>&1`, `<<EOF`, … and the word it applies to."""

    op: str
    target: Word


@dataclass(frozen=True)
class Simple:
    """A simple command: assignments, then its words (the first is the command word)."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str  # as written, from its first token to its last
    start: int  # offset of `text` in the source its words' offsets refer to


@dataclass(frozen=True)
class Compound:
    """`( … )`, `{ …; }`, `if`, `while`, `until`, `for`, `select`, `case`, `[[`, `((`,
    or a function definition (`kind` "function"), with the scripts inside it."""

    kind: str
    bodies: tuple[ShellScript, ...]
    words: tuple[Word, ...]  # words of its header (`for x in …`, `case … in`, `[[ … ]]`)
    redirects: tuple[Redirect, ...]


Command = Simple | Compound


@dataclass(frozen=True)
class Pipeline:
    """Commands joined by `|` or `|&`, optionally negated by `!`."""

    commands: tuple[Command, ...]
    negated: bool


@dataclass(frozen=True)
class AndOr:
    """Pipelines joined by `&&` and `||`; `background` when `&` ends it."""

    pipelines: tuple[Pipeline, ...]
    operators: tuple[str, ...]
    background: bool


@dataclass(frozen=True)
class ShellScript:
    """A list: and-or chains run one after the other (`;`, `&`, newline)."""

    items: tuple[AndOr, ...]
