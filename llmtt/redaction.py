"""Secrets out of every human-readable artifact: secret-named variables' values and key shapes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_-]{16,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}"
)
MASK = "[REDACTED]"


class Redactor:
    """Replaces known secret values and key-shaped strings with a mask."""

    def __init__(self, *envs: Mapping[str, str]) -> None:
        values: set[str] = set()
        for env in (os.environ, *envs):
            for name, value in env.items():
                if SECRET_NAME.search(name) and len(value) >= 6:
                    values.add(value)
        self._values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """`text` with secrets masked."""
        for value in self._values:
            text = text.replace(value, MASK)
        return KEY_SHAPES.sub(MASK, text)

    def all(self, texts: Iterable[str]) -> list[str]:
        """Redact many strings."""
        return [self(t) for t in texts]
