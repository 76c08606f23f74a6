"""Secrets never reach human-readable artifacts."""

from __future__ import annotations

import pytest

from llmtt.redaction import MASK, Redactor


def test_values_of_secret_named_variables_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567")
    redact = Redactor({"DB_PASSWORD": "hunter2hunter2", "PLAIN": "visible-value"})
    text = redact("token tok-1234567, pw hunter2hunter2, plain visible-value")
    assert text == f"token {MASK}, pw {MASK}, plain visible-value"


@pytest.mark.parametrize(
    "secret",
    [
        "sk-ant-api03-abcdefghijklmnopqrstuv",
        "sk-proj-abcdefghijklmnopqrstuvwxyz12",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAABCDEFGHIJKLMNOP",
    ],
)
def test_known_key_shapes_are_masked(secret: str) -> None:
    assert Redactor()(f"key={secret} end") == f"key={MASK} end"


def test_short_values_are_not_treated_as_secrets() -> None:
    assert Redactor({"API_KEY": "abc"})("abc and abcdef") == "abc and abcdef"
