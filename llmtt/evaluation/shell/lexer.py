"""The words and operators of a shell command line, as bash would read them.

Quotes (single, double, `$'…'`, `$"…"`), backslash escapes and line continuations, comments,
operators and redirections (with their file descriptor), heredoc bodies (skipped: they are not
commands), `${…}` and `$((…))` (kept as text), and the command substitutions `$(…)`, backquotes
and `<(…)`/`>(…)`, whose insides are parsed as scripts of their own (see `parser`).
Nothing is expanded. A line bash could not read raises `ShellSyntaxError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from llmtt.evaluation.shell.syntax import ShellScript, Token, Word

# Longest first: an operator is the longest of these the text starts with.
OPERATORS = (
    *(";;&", "&>>", "<<<", "<<-"),
    *("&&", "||", ";;", ";&", "|&", "&>", "<<", ">>", "<&", ">&", "<>", ">|"),
    *("&", "|", ";", "<", ">", "(", ")"),
)
REDIRECTIONS = frozenset({"<", ">", ">>", "<<", "<<-", "<<<", "<&", ">&", "<>", ">|", "&>", "&>>"})
_METACHARACTERS = frozenset(" \t\n;&|<>()")
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "e": "\x1b", "a": "\a", "0": "\0"}


class ShellSyntaxError(ValueError):
    """A line this lexer cannot read: an unbalanced quote, a `$(` without `)`, …"""


# Parses what follows `$(` (up to and with its `)`) when `closed`, else a whole lexer's text.
Nested = Callable[["Lexer", bool], ShellScript]


class Lexer:
    """Reads tokens from a command line one at a time; `depth` counts nesting levels."""

    def __init__(self, source: str, nested: Nested, depth: int = 0) -> None:
        self.src = source
        self.pos = 0
        self.depth = depth
        self._nested = nested
        self._heredocs: list[tuple[str, bool]] = []  # delimiter, leading tabs stripped
        self._delimiter_next: bool | None = None  # set after `<<` / `<<-`

    def next(self) -> Token:
        """The next token; a newline token comes after the bodies of pending heredocs."""
        self._skip_blanks()
        start, src = self.pos, self.src
        if start >= len(src):
            return Token("end", "", start, start)
        if src[start] == "\n":
            self.pos += 1
            self._skip_heredoc_bodies()
            return Token("newline", "\n", start, start + 1)
        if src.startswith(("<(", ">("), start):
            return self._process_substitution()
        operator = self._operator(start)
        if operator is not None:
            return operator
        word = self._word()
        if (
            word.plain
            and word.value.isdigit()
            and src.startswith(("<", ">"), self.pos)
            and not src.startswith(("<(", ">("), self.pos)
        ):
            redirect = self._operator(self.pos)  # `2>&1`: the number is the descriptor
            assert redirect is not None  # every operator starting with < or > redirects
            return Token("redirect", redirect.text, start, redirect.end)
        if self._delimiter_next is not None:
            self._heredocs.append((word.value, self._delimiter_next))
            self._delimiter_next = None
        return Token("word", word.text, start, self.pos, word)

    def arithmetic_end(self, i: int) -> int | None:
        """Where the `((…))` whose body starts at `i` ends, or None when it is no arithmetic
        but a subshell in a subshell (`((a) | b)`)."""
        depth, src = 2, self.src
        while i < len(src):
            char = src[i]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 1 and not src.startswith(")", i + 1):
                    return None
                if depth == 0:
                    return i + 1
            i += 1
        raise ShellSyntaxError("unterminated `((`")

    def _operator(self, start: int) -> Token | None:
        for op in OPERATORS:
            if self.src.startswith(op, start):
                self.pos = start + len(op)
                if op in ("<<", "<<-"):
                    self._delimiter_next = op == "<<-"
                kind = "redirect" if op in REDIRECTIONS else "op"
                return Token(kind, op, start, self.pos)
        return None

    def _skip_blanks(self) -> None:
        src = self.src
        while self.pos < len(src):
            char = src[self.pos]
            if char in " \t":
                self.pos += 1
            elif char == "\\" and src.startswith("\n", self.pos + 1):
                self.pos += 2
            elif char == "#":  # a comment runs to the end of the line, newline excluded
                end = src.find("\n", self.pos)
                self.pos = len(src) if end < 0 else end
            else:
                return

    def _skip_heredoc_bodies(self) -> None:
        src = self.src
        for delimiter, strip_tabs in self._heredocs:
            while self.pos < len(src):
                end = src.find("\n", self.pos)
                line = src[self.pos : len(src) if end < 0 else end]
                self.pos = len(src) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self._heredocs.clear()

    def _word(self) -> Word:
        start, src = self.pos, self.src
        value: list[str] = []
        subs: list[ShellScript] = []
        plain = True
        while self.pos < len(src):
            char = src[self.pos]
            if char == "(" and _ARRAY_START.fullmatch(src, start, self.pos):
                self._array(value, subs)
                plain = False
            elif char in _METACHARACTERS:
                break
            elif char == "\\":
                plain = False
                if src.startswith("\n", self.pos + 1):
                    self.pos += 2
                else:
                    value.append(src[self.pos + 1 : self.pos + 2] or "\\")
                    self.pos += 2
            elif char == "'":
                plain = False
                end = src.find("'", self.pos + 1)
                if end < 0:
                    raise ShellSyntaxError("unterminated single quote")
                value.append(src[self.pos + 1 : end])
                self.pos = end + 1
            elif char == '"':
                plain = False
                self._double_quoted(value, subs)
            elif char in "$`":
                plain = False
                self._expansion(value, subs, quoted=False)
            else:
                value.append(char)
                self.pos += 1
        self.pos = min(self.pos, len(src))
        return Word(src[start : self.pos], "".join(value), start, self.pos, plain, tuple(subs))

    def _double_quoted(self, value: list[str], subs: list[ShellScript]) -> None:
        src = self.src
        self.pos += 1
        while self.pos < len(src):
            char = src[self.pos]
            if char == '"':
                self.pos += 1
                return
            if char == "\\" and src[self.pos + 1 : self.pos + 2] in ("$", "`", '"', "\\", "\n"):
                if src[self.pos + 1] != "\n":
                    value.append(src[self.pos + 1])
                self.pos += 2
            elif char in "$`":
                self._expansion(value, subs, quoted=True)
            else:
                value.append(char)
                self.pos += 1
        raise ShellSyntaxError("unterminated double quote")

    def _expansion(self, value: list[str], subs: list[ShellScript], *, quoted: bool) -> None:
        """`$…` or a backquote at `pos`: its text goes into the value, its commands into subs."""
        src, start = self.src, self.pos
        if src[start] == "`":
            subs.append(self._backquoted())
        elif src.startswith("$((", start):
            end = self.arithmetic_end(start + 3)
            if end is None:  # `$((a) | b)`: a substitution holding a subshell
                self.pos = start + 2
                subs.append(self._nested(self, True))
            else:
                self.pos = end
        elif src.startswith("$(", start):
            self.pos += 2
            subs.append(self._nested(self, True))
        elif src.startswith("${", start):
            self.pos = self._brace_end(start + 2)
        elif not quoted and src.startswith("$'", start):
            self._ansi_c(value)
            return
        elif not quoted and src.startswith('$"', start):
            self.pos += 1
            self._double_quoted(value, subs)
            return
        else:
            self.pos += 1
        value.append(src[start : self.pos])

    def _brace_end(self, i: int) -> int:
        """The end of a `${…}` whose body starts at `i`."""
        depth, src = 1, self.src
        while i < len(src):
            char = src[i]
            if char == "\\":
                i += 2
                continue
            if char == "'" or char == '"':
                end = src.find(char, i + 1)
                if end < 0:
                    break
                i = end
            elif src.startswith("${", i):
                depth += 1
                i += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise ShellSyntaxError("unterminated `${`")

    def _ansi_c(self, value: list[str]) -> None:
        src, i = self.src, self.pos + 2
        while i < len(src):
            char = src[i]
            if char == "'":
                self.pos = i + 1
                return
            if char == "\\" and i + 1 < len(src):
                value.append(_ANSI_C.get(src[i + 1], src[i + 1]))
                i += 2
            else:
                value.append(char)
                i += 1
        raise ShellSyntaxError("unterminated $'…' quote")

    def _backquoted(self) -> ShellScript:
        src, i = self.src, self.pos + 1
        inner: list[str] = []
        while i < len(src) and src[i] != "`":
            if src[i] == "\\" and i + 1 < len(src):
                # Inside backquotes a backslash escapes only $, ` and \ (and is kept otherwise).
                pair = src[i : i + 2]
                inner.append(pair[1] if pair[1] in "$`\\" else pair)
                i += 2
            else:
                inner.append(src[i])
                i += 1
        if i >= len(src):
            raise ShellSyntaxError("unterminated backquote")
        self.pos = i + 1
        return self._nested(Lexer("".join(inner), self._nested, self.depth + 1), False)

    def _process_substitution(self) -> Token:
        start = self.pos
        self.pos += 2
        script = self._nested(self, True)
        text = self.src[start : self.pos]
        return Token(
            "word", text, start, self.pos, Word(text, text, start, self.pos, False, (script,))
        )

    def _array(self, value: list[str], subs: list[ShellScript]) -> None:
        """`NAME=(a "b c" $(d))`: read up to the closing `)` as part of the word."""
        start = self.pos
        self.pos += 1
        while True:
            self._skip_blanks()
            if self.src.startswith("\n", self.pos):
                self.pos += 1
                continue
            if self.pos >= len(self.src):
                raise ShellSyntaxError("unterminated array `(`")
            if self.src[self.pos] == ")":
                self.pos += 1
                break
            word = self._word()
            if word.end == word.start:
                raise ShellSyntaxError(f"unexpected {self.src[self.pos]!r} in an array")
            subs.extend(word.substitutions)
        value.append(self.src[start : self.pos])
