"""Text helpers (llmtt/util/text.py): what a run printed, made safe to show."""

from __future__ import annotations

import base64
import json
import random

import pytest

from llmtt.util.text import most_tokens, printable

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


TEXTS = {
    "prose": "The agent read the README, ran the tests and fixed the failing one. " * 20,
    "code": 'def f(x):\n    return {"a": [1, 2, 3], "b": x}\n' * 20,
    "json": json.dumps([{"id": i, "ok": i % 2 == 0, "tags": ["x", "y"]} for i in range(40)]),
    "punctuation": "{[(<>)]};:,.!?" * 30,
    "shell": "$ git status --short && ls -la | grep -v '^d' ; echo $?\n" * 20,
    "cjk": "日本語のテキストを書きます。評価は正しいです。" * 10,
    "cyrillic": "Привет, как дела? Это тест агента. " * 10,
    "emoji": "🙂🚀🎉✅❌" * 20,
    "rare": "𝕏𝔸𝔹ℂﷺ" * 20,
    "base64": base64.b64encode(random.Random(1).randbytes(3000)).decode(),
    "controls": "".join(map(chr, random.Random(2).choices(range(1, 32), k=2000))),
    "versions": "v1.2.3 " * 300,
    "freeze": "".join(f"pkg{i}=={i % 7}.{i % 13}.{i}\n" for i in range(200)),
    "a1": "a1" * 500,
    "printable": "".join(map(chr, random.Random(3).choices(range(32, 127), k=2000))),
    "coloured": "".join(
        f"\x1b[3{i % 8}m{('ok', 'FAIL', 'warn')[i % 3]}\x1b[0m " for i in range(300)
    ),
}


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-3.5-turbo", "claude-3-5-sonnet-20240620"])
def test_most_tokens_is_never_below_a_real_tokenizers_count(model: str) -> None:
    """What a judge, triage or paid evaluator request holds of the budget starts from
    `most_tokens` of its prompt: it must not count fewer tokens than the model does, whatever
    the language or the punctuation (litellm's own tokenizers, as it ships them)."""
    from llmtt.providers import import_litellm

    litellm = import_litellm("this test")
    for name, text in TEXTS.items():
        counted = litellm.token_counter(model=model, text=text)
        assert most_tokens(text) >= counted, (name, most_tokens(text), counted)
    # Prose is not held at many times what it costs.
    prose = TEXTS["prose"]
    assert most_tokens(prose) <= 4 * litellm.token_counter(model=model, text=prose)
