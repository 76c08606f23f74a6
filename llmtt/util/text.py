"""Text helpers shared by every layer."""

from __future__ import annotations

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
