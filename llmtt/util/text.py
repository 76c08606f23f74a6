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
