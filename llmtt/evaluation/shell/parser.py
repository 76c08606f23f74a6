"""The structure of a shell command line: lists, `&&`/`||` chains, pipelines and commands.

A recursive-descent reading of bash's grammar, enough to know where every command stands and
how the line's exit status relates to it: simple commands, `( … )` subshells, `{ …; }` groups,
`if`/`while`/`until`/`for`/`select`/`case`, `[[ … ]]`, `(( … ))`, function definitions, and
the command substitutions inside words. `parse` raises `ShellSyntaxError` where bash would
report a syntax error, or where a line nests deeper than `MAX_DEPTH`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from llmtt.evaluation.shell.lexer import Lexer, ShellSyntaxError
from llmtt.evaluation.shell.syntax import (
    AndOr,
    Command,
    Compound,
    Pipeline,
    Redirect,
    ShellScript,
    Simple,
    Token,
    Word,
)

MAX_DEPTH = 40  # nested subshells, groups and substitutions; agents' lines use a handful
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_CASE_ENDS = frozenset({";;", ";&", ";;&"})


def parse(line: str) -> ShellScript:
    """The structure of `line`; ShellSyntaxError when bash could not read it either."""
    try:
        return _nested(Lexer(line, _nested), False)
    except RecursionError:
        raise ShellSyntaxError(f"nested deeper than {MAX_DEPTH} levels") from None


def _nested(lexer: Lexer, closed: bool) -> ShellScript:
    """A script read from `lexer` up to its `)` (`closed`) or to its end."""
    lexer.depth += 1
    if lexer.depth > MAX_DEPTH:
        raise ShellSyntaxError(f"nested deeper than {MAX_DEPTH} levels")
    parser = _Parser(lexer)
    script = parser.script(frozenset({")"}) if closed else frozenset())
    if closed:
        parser.expect_op(")")
    elif (token := parser.peek()).kind != "end":
        raise ShellSyntaxError(f"unexpected {token.text!r}")
    lexer.depth -= 1
    return script


def commands(script: ShellScript) -> Iterator[Command]:
    """Every command of `script` in order, with those inside compound commands (not those in
    command substitutions)."""
    for item in script.items:
        for pipeline in item.pipelines:
            for command in pipeline.commands:
                yield command
                if isinstance(command, Compound):
                    for body in command.bodies:
                        yield from commands(body)


class _Parser:
    """One script's reading: tokens from the lexer, one token of lookahead."""

    def __init__(self, lexer: Lexer) -> None:
        self.lexer = lexer
        self._ahead: Token | None = None

    def peek(self) -> Token:
        if self._ahead is None:
            self._ahead = self.lexer.next()
        return self._ahead

    def take(self) -> Token:
        token = self.peek()
        self._ahead = None
        return token

    def expect_op(self, op: str) -> None:
        token = self.take()
        if token.kind != "op" or token.text != op:
            raise ShellSyntaxError(f"expected {op!r}, found {token.text or 'the end'!r}")

    def expect_word(self, reserved: str | None = None) -> Word:
        token = self.take()
        if token.word is None or (reserved is not None and not _is(token, reserved)):
            wanted = repr(reserved) if reserved else "a word"
            raise ShellSyntaxError(f"expected {wanted}, found {token.text or 'the end'!r}")
        return token.word

    def script(self, closers: frozenset[str]) -> ShellScript:
        """And-or chains up to one of `closers` (an operator or a reserved word), not taken."""
        items: list[AndOr] = []
        while True:
            self._newlines()
            token = self.peek()
            if token.kind == "end" or _closes(token, closers):
                return ShellScript(tuple(items))
            pipelines, operators = self._and_or()
            token = self.peek()
            background = token.kind == "op" and token.text == "&"
            if (token.kind == "op" and token.text in (";", "&")) or token.kind == "newline":
                self.take()
            elif token.kind != "end" and not _closes(token, closers):
                raise ShellSyntaxError(f"unexpected {token.text!r}")
            items.append(AndOr(pipelines, operators, background))

    def _newlines(self) -> None:
        while self.peek().kind == "newline":
            self.take()

    def _and_or(self) -> tuple[tuple[Pipeline, ...], tuple[str, ...]]:
        pipelines = [self._pipeline()]
        operators = []
        while (token := self.peek()).kind == "op" and token.text in ("&&", "||"):
            operators.append(self.take().text)
            self._newlines()
            pipelines.append(self._pipeline())
        return tuple(pipelines), tuple(operators)

    def _pipeline(self) -> Pipeline:
        negated = False
        while _is(self.peek(), "!") or _is(self.peek(), "time"):
            negated ^= self.take().text == "!"
            if _is(self.peek(), "-p"):  # `time -p`
                self.take()
        commands = [self._command()]
        while (token := self.peek()).kind == "op" and token.text in ("|", "|&"):
            self.take()
            self._newlines()
            commands.append(self._command())
        return Pipeline(tuple(commands), negated)

    def _command(self) -> Command:
        token = self.peek()
        if token.kind == "op" and token.text == "(":
            self.take()
            return self._parenthesised()
        if token.word is not None and token.word.plain:
            reader = _COMPOUNDS.get(token.text)
            if reader is not None:
                self.take()
                self.lexer.depth += 1
                if self.lexer.depth > MAX_DEPTH:
                    raise ShellSyntaxError(f"nested deeper than {MAX_DEPTH} levels")
                kind, bodies, words = reader(self)
                self.lexer.depth -= 1
                return Compound(kind, bodies, words, self._redirects())
            if token.text in _CLOSERS:
                raise ShellSyntaxError(f"unexpected {token.text!r}")
        return self._simple()

    def _parenthesised(self) -> Command:
        """After `(`: an arithmetic command `(( … ))` or a subshell."""
        lexer = self.lexer
        if lexer.src.startswith("(", lexer.pos):
            end = lexer.arithmetic_end(lexer.pos + 1)
            if end is not None:
                lexer.pos = end
                return Compound("((", (), (), self._redirects())
        lexer.depth += 1
        if lexer.depth > MAX_DEPTH:
            raise ShellSyntaxError(f"nested deeper than {MAX_DEPTH} levels")
        body = self.script(frozenset({")"}))
        self.expect_op(")")
        lexer.depth -= 1
        return Compound("(", (body,), (), self._redirects())

    def _redirects(self) -> tuple[Redirect, ...]:
        redirects = []
        while self.peek().kind == "redirect":
            op = self.take().text
            redirects.append(Redirect(op, self.expect_word()))
        return tuple(redirects)

    def _simple(self) -> Command:
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        first = self.peek()
        end = first.start
        while True:
            token = self.peek()
            if token.word is not None:
                self.take()
                is_assignment = not words and _ASSIGNMENT.match(token.word.text)
                (assignments if is_assignment else words).append(token.word)
                end = token.end
            elif token.kind == "redirect":
                self.take()
                redirects.append(Redirect(token.text, target := self.expect_word()))
                end = target.end
            elif token.kind == "op" and token.text == "(" and len(words) == 1:
                return self._function(words[0], assignments or redirects)
            else:
                break
        if not (assignments or words or redirects):
            raise ShellSyntaxError(f"expected a command, found {first.text or 'the end'!r}")
        text = self.lexer.src[first.start : end]
        return Simple(tuple(assignments), tuple(words), tuple(redirects), text, first.start)

    def _function(self, name: Word, prefix: object) -> Command:
        """`name() body`: the body's commands run where the function is called."""
        if prefix:
            raise ShellSyntaxError(f"unexpected '(' after {name.text!r}")
        self.take()
        self.expect_op(")")
        self._newlines()
        body = self._command()
        return Compound("function", (_single(body),), (name,), ())

    # Readers of the compound commands that start with a reserved word (taken already).

    def _group(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        body = self.script(frozenset({"}"}))
        self.expect_word("}")
        return "{", (body,), ()

    def _if(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        bodies = []
        word = "if"
        while word in ("if", "elif"):
            bodies.append(self.script(frozenset({"then"})))
            self.expect_word("then")
            bodies.append(self.script(frozenset({"elif", "else", "fi"})))
            word = self.expect_word().value
        if word == "else":
            bodies.append(self.script(frozenset({"fi"})))
            self.expect_word("fi")
        elif word != "fi":
            raise ShellSyntaxError(f"expected 'fi', found {word!r}")
        return "if", tuple(bodies), ()

    def _loop(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        condition = self.script(frozenset({"do"}))
        return "while", (condition, self._do_done()), ()

    def _do_done(self) -> ShellScript:
        self._newlines()
        self.expect_word("do")
        body = self.script(frozenset({"done"}))
        self.expect_word("done")
        return body

    def _for(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        words: list[Word] = []
        token = self.peek()
        if token.kind == "op" and token.text == "(":  # for (( i = 0; i < 3; i++ ))
            self.take()
            end = self.lexer.arithmetic_end(self.lexer.pos + 1)
            if not self.lexer.src.startswith("(", self.lexer.pos) or end is None:
                raise ShellSyntaxError("expected `((` after `for`")
            self.lexer.pos = end
        else:
            words.append(self.expect_word())
            self._newlines()
            if _is(self.peek(), "in"):
                self.take()
                while self.peek().word is not None:
                    words.append(self.expect_word())
        if (token := self.peek()).kind == "newline" or (token.kind == "op" and token.text == ";"):
            self.take()
        return "for", (self._do_done(),), tuple(words)

    def _case(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        words = [self.expect_word()]
        self._newlines()
        self.expect_word("in")
        bodies: list[ShellScript] = []
        while True:
            self._newlines()
            if _is(self.peek(), "esac"):
                self.take()
                return "case", tuple(bodies), tuple(words)
            if (token := self.peek()).kind == "op" and token.text == "(":
                self.take()
            while not ((token := self.take()).kind == "op" and token.text == ")"):
                if token.word is not None:
                    words.append(token.word)
                elif token.kind != "op" or token.text != "|":
                    raise ShellSyntaxError(f"unexpected {token.text or 'end'!r} in a case pattern")
            bodies.append(self.script(_CASE_ENDS | {"esac"}))
            if (token := self.peek()).kind == "op" and token.text in _CASE_ENDS:
                self.take()

    def _test(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        """`[[ … ]]`: its `&&`, `<`, `(` are the test's own, not the shell's."""
        words = []
        while not _is(token := self.take(), "]]"):
            if token.kind == "end":
                raise ShellSyntaxError("unterminated `[[`")
            if token.word is not None:
                words.append(token.word)
        return "[[", (), tuple(words)

    def _function_keyword(self) -> tuple[str, tuple[ShellScript, ...], tuple[Word, ...]]:
        name = self.expect_word()
        if (token := self.peek()).kind == "op" and token.text == "(":
            self.take()
            self.expect_op(")")
        self._newlines()
        return "function", (_single(self._command()),), (name,)


_COMPOUNDS = {
    "{": _Parser._group,
    "if": _Parser._if,
    "while": _Parser._loop,
    "until": _Parser._loop,
    "for": _Parser._for,
    "select": _Parser._for,
    "case": _Parser._case,
    "[[": _Parser._test,
    "function": _Parser._function_keyword,
}
_CLOSERS = frozenset({"}", "then", "elif", "else", "fi", "do", "done", "esac"})


def _is(token: Token, reserved: str) -> bool:
    return token.word is not None and token.word.plain and token.text == reserved


def _closes(token: Token, closers: frozenset[str]) -> bool:
    if token.kind == "op":
        return token.text in closers
    return token.word is not None and token.word.plain and token.text in closers


def _single(command: Command) -> ShellScript:
    return ShellScript((AndOr((Pipeline((command,), False),), (), False),))
