"""Text helpers (llmtt/util/text.py): what a run printed, made safe to show."""

from __future__ import annotations

import pytest

from llmtt.util.text import printable

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m \x00nul \x9bcsi \x1b]8;;http://x\x1b\\link"


def test_printable_removes_terminal_sequences_and_escapes_other_controls() -> None:
    assert printable(HOSTILE) == "red \\x00nul \\x9bcsi link"
    assert printable("a\x1b") == "a\\x1b"  # a sequence cut short: its ESC shown, inert
    assert printable("bell\x07 back\x08 del\x7f") == "bell\\x07 back\\x08 del\\x7f"
    assert printable("half \ud800 non \uffff") == "half \\ud800 non \\uffff"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("tab\tand\nnewline", "tab\tand\nnewline"),  # kept
        ("crlf\r\nline", "crlf\nline"),
        ("10%\r50%\r100%", "10%\n50%\n100%"),  # a progress line: each step on its own line
        ("naïve ☃ 𝄞 \u2028", "naïve ☃ 𝄞 \u2028"),
    ],
)
def test_printable_keeps_tab_newline_and_any_printable_character(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_leaves_a_text_without_controls_as_it_is() -> None:
    text = "plain " * 1000
    assert printable(text) is text
