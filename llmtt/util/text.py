"""Text helpers shared by every layer."""

from __future__ import annotations

import re
from typing import Any, Protocol


class Masks(Protocol):
    """What masks secrets in what llmtt writes (`llmtt.redaction.Redactor`): the leaves that
    write take one without importing the redaction rules."""

    def __call__(self, text: str) -> str:
        """`text` with secrets masked."""

    def text(self, text: str) -> str:
        """`text` with secrets masked (remembered for short strings)."""

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it masked."""


_ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[78=>]"
)


def strip_ansi(text: str) -> str:
    """Terminal control sequences removed."""
    return _ANSI.sub("", text)


# What no terminal, Markdown or HTML viewer, or XML parser is handed raw: C0 controls but tab and
# newline, DEL, C1 controls (U+009B starts a control sequence on some terminals), lone halves of
# UTF-16 pairs and the two non-characters XML 1.0 forbids.
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """Text from a run (a command's output, an error quoting it) made safe to show on a
    terminal, in Markdown or HTML, or in XML: terminal sequences removed, carriage returns made
    line ends, and every other control character but tab and newline written as an escape
    (`\\x1b`). Apply it after redaction: an escape glued to a key could hide the key's shape."""
    if _UNSHOWN.search(text) is None:
        return text
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n")
    return _UNSHOWN.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_CONTROLS = re.compile("[\x00-\x1f\x7f]")
_PIECES = re.compile(r"\d{1,3}|[A-Za-z]+|[!-/:-@\[-`{-~]+| +")


def most_tokens(text: str) -> int:
    """The most tokens a model may count in `text`, for what a request holds of the budget:
    four tokens for five printable ASCII characters, or a token a piece where digits, words and
    punctuation alternate more densely (measured with litellm's tokenizers: prose runs near four
    characters a token, shell near three, JSON and code near two; punctuation, random base64 or
    printable text, terminal colours near 1.3; version lists a token a piece), a token for each
    ASCII control character (a newline or a tab too), and a token for each byte of the rest,
    which a byte-level tokenizer may give a rare character (a CJK character is three bytes, an
    emoji four). Three characters a token, as this was counted before, undercounted JSON and
    code, and CJK text up to threefold."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    controls = len(_CONTROLS.findall(text))
    rest = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    printable = (ascii_chars - controls) * 4 // 5
    if printable:
        # Digits are split from letters and punctuation, at most three a token: text dense in
        # them (version lists, `pip freeze`) counts a token a piece.
        printable = max(printable, len(_PIECES.findall(text)))
    return printable + controls + rest
