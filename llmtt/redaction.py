"""Secrets out of every human-readable artifact, whole or cut short.

A *known secret* is the value of a variable whose name says it holds one (a name part KEY,
TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, ..., not ending in FILE, PATH, DIR, ...), taken
from the process environment and from every `env` table of llmtt.toml, when it is at least
`GRAM` characters long and not a plain word or number ("scripted", "8080"). Artifacts often show
a secret cut (a head or a tail kept, a window of a long output): every run of `GRAM` or more
consecutive characters of a known secret is masked, widened to as much of the secret as is there.

Strings shaped like keys (sk-, sk-ant-, gh*_, github_pat_, AKIA/ASIA, AIza, xox*-, JWTs, PEM
private keys) are masked too, known or not. They are found by their fixed start and a few
characters after it, so a key cut short is masked; a key llmtt does not know, whose start was
cut off, cannot be recognised.

The password of a URL (`postgres://app:PASSWORD@host`, `https://user:TOKEN@github.com/...`) is
masked whatever it is, short or plain; the user name and the rest of the URL stay.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "[REDACTED]"
GRAM = 8
ANCHOR = GRAM // 2
CACHED_LENGTH = 1024  # Redactor.value remembers the masked form of strings up to this long
CACHED_COUNT = 100_000  # ... and at most this many of them (forgotten all at once past it)
FINGERPRINT_ROUNDS = 100_000  # PBKDF2 rounds of Redactor.fingerprint: ~40 ms here

_SECRET_PARTS = frozenset(
    "KEY KEYS APIKEY TOKEN TOKENS SECRET SECRETS PASSWORD PASSWD PASS PASSPHRASE "
    "CREDENTIAL CREDENTIALS CREDS AUTH PAT".split()
)
_GLUED = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS")
# A name ending so refers to a secret (a file, a socket, a variable) rather than holding one.
_REFERENCE_PARTS = frozenset("FILE PATH DIR SOCK SOCKET URL URI HOST NAME ID TYPE ENV".split())
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Values made of these get partial masking; others (paths, URLs, phrases) are masked whole.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+/=.~-]*")
_TOKEN_RUN = re.compile(rf"[A-Za-z0-9_+/=.~-]{{{GRAM},}}")

_B = r"(?<![A-Za-z0-9_-])"  # a key starts a word
KEY_SHAPES = re.compile(
    "|".join(
        [
            _B + r"sk-[A-Za-z0-9_-]{12,}",  # OpenAI, Anthropic (sk-ant-...) and look-alikes
            _B + r"gh[pousr]_[A-Za-z0-9]{6,}",
            _B + r"github_pat_[A-Za-z0-9_]{6,}",
            r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{6,}",
            _B + r"AIza[A-Za-z0-9_-]{8,}",
            _B + r"xox[abposr]-[A-Za-z0-9-]{6,}",
            _B + r"eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){0,2}",  # a JWT, or base64 JSON
            # A PEM private key up to its END line or, cut before that, to the end of its body.
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?s:.*?)-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\s-]*)",
        ]
    )
)
# Cheap to look for (`in`, at C speed; an alternation in `re` tries each branch at every
# character): a text without any of these has no key shape in it.
_SHAPE_HINTS = (
    *("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "AIza"),
    *("xox", "eyJ", "-----BEGIN"),
)
# A URL's user information with a password: `://`, a user name (maybe empty), `:`, the password
# (up to the `@` that ends it; neither `/` nor white space nor a quote, which would end the URL
# or the user part first).
URL_PASSWORD = re.compile(r"(://[^\s/:@'\"`<>]*:)[^\s/@'\"`<>]+(?=@)")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]*|[A-Za-z-]+: .*")


def secret_name(name: str) -> bool:
    """True when a variable called `name` holds a secret by its name."""
    parts = [p.upper() for p in _NAME_PART.findall(name)]
    if not parts or parts[-1] in _REFERENCE_PARTS:
        return False
    return any(p in _SECRET_PARTS or p.endswith(_GLUED) for p in parts)


def secret_value(value: str) -> bool:
    """True when `value` is long and varied enough to be masked wherever it appears."""
    if len(value) < GRAM:
        return False
    kinds = sum(
        any(test(c) for c in value)
        for test in (str.islower, str.isupper, str.isdigit, lambda c: not c.isalnum())
    )
    return kinds >= 2 or len(value) >= 16


class Redactor:
    """Masks known secrets (whole, or any `GRAM`-character run of one) and key-shaped strings."""

    def __init__(self, *envs: Mapping[str, str], names: Iterable[str] = ()) -> None:
        """Known secrets: secret-named variables of the process environment and of `envs`, and
        the process environment's `names` whatever they are called."""
        values = {os.environ[n].strip() for n in names if n in os.environ}
        for env in (os.environ, *envs):
            values.update(v.strip() for n, v in env.items() if secret_name(n))
        self._secrets = frozenset(v for v in values if secret_value(v))
        self._values = _compile(self._secrets)
        self._done: dict[str, str] = {}

    def fingerprint(self, salt: bytes) -> str:
        """What tells this redactor's secrets from another set, safe to keep in a file: a slow
        salted hash of all of them, so that a weak one cannot be guessed from it."""
        import hashlib

        joined = "\0".join(sorted(self._secrets)).encode()
        return hashlib.pbkdf2_hmac("sha256", joined, salt, FINGERPRINT_ROUNDS).hex()

    def __call__(self, text: str) -> str:
        """`text` with secrets masked."""
        values = self._values
        if values.whole is None and values.hints.search(text) is None:
            return text
        text = values.mask(text)
        if any(hint in text for hint in _SHAPE_HINTS):
            text = KEY_SHAPES.sub(MASK, text)
        if "://" in text:
            text = URL_PASSWORD.sub(r"\1" + MASK, text)
        return _mask_pem_tails(text) if "-----END" in text else text

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it (keys too) masked."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in _PLAIN or value is None:
            return value
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, str):  # a str subclass
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        """`text` masked, as `__call__` does; a short one remembered, for records repeat their
        keys and many values: a report of thousands of runs, or an event log, redacts each
        distinct short string once."""
        if len(text) > CACHED_LENGTH:  # long texts rarely repeat: not even hashed
            return self(text)
        done = self._done.get(text)
        if done is None:
            done = self(text)
            if len(self._done) >= CACHED_COUNT:  # a redactor shared by thousands of runs
                self._done.clear()
            self._done[text] = done
        return done


_PLAIN = frozenset({int, float, bool})


class _Values:
    """The known secrets: whole (one alternation, for those with spaces or other separators in
    them) and, for token-like ones, every `GRAM`-character run, looked up in the token-like runs
    of a text; a hit is widened to all of the secret the text shows there."""

    def __init__(self, values: frozenset[str]) -> None:
        self.grams: dict[str, list[tuple[str, int]]] = {}
        # Every run of GRAM characters of a secret holds one of its ANCHOR-character pieces that
        # start at a multiple of ANCHOR (the piece starting at the first such offset in the run
        # ends before the run does): a text holding none of these pieces, which `in` finds at
        # C speed, holds no run of any secret, and the per-character search is skipped.
        self.anchors: set[str] = set()
        whole = []
        for value in values:
            if not _TOKEN_LIKE.fullmatch(value):
                whole.append(value)
                continue
            for offset in range(len(value) - GRAM + 1):
                self.grams.setdefault(value[offset : offset + GRAM], []).append((value, offset))
            for offset in range(0, len(value) - ANCHOR + 1, ANCHOR):
                self.anchors.add(value[offset : offset + ANCHOR])
        # Longest first: an alternation takes the first branch that matches.
        whole.sort(key=len, reverse=True)
        self.whole = re.compile("|".join(map(re.escape, whole))) if whole else None
        # What every masking starts from, token-like secrets' pieces, key shapes' starts, a
        # PEM key's END line and a URL's `://`, in one pass over a text: most texts hold none
        # of them and are done at once (one scan for each of twenty strings took twice as long).
        self.hints = _any_of({*self.anchors, *_SHAPE_HINTS, "-----END", "://"})

    def mask(self, text: str) -> str:
        """`text` with every known secret, or run of one, replaced by the mask."""
        if self.whole is not None:
            text = self.whole.sub(MASK, text)
        if not self.grams or not any(anchor in text for anchor in self.anchors):
            return text
        return _TOKEN_RUN.sub(self._mask_run, text)

    def _mask_run(self, match: re.Match[str]) -> str:
        run = match.group()
        spans: list[tuple[int, int]] = []
        i = 0
        while i <= len(run) - GRAM:
            hits = self.grams.get(run[i : i + GRAM])
            if hits is None:
                i += 1
                continue
            start, end = _widen(run, i, hits)
            if spans and start <= spans[-1][1]:
                start = spans.pop()[0]
            spans.append((start, end))
            i = max(i + 1, end - GRAM + 1)
        if not spans:
            return run
        out, pos = [], 0
        for start, end in spans:
            out += [run[pos:start], MASK]
            pos = end
        out.append(run[pos:])
        return "".join(out)


def _widen(run: str, at: int, hits: list[tuple[str, int]]) -> tuple[int, int]:
    """The widest stretch around the gram at `at` that is a stretch of one secret."""
    low, high = at, at + GRAM
    for value, offset in hits:
        start, end, first, last = at, at + GRAM, offset, offset + GRAM
        while start > 0 and first > 0 and run[start - 1] == value[first - 1]:
            start, first = start - 1, first - 1
        while end < len(run) and last < len(value) and run[end] == value[last]:
            end, last = end + 1, last + 1
        low, high = min(low, start), max(high, end)
    return low, high


def _any_of(words: Iterable[str]) -> re.Pattern[str]:
    """A pattern matching any of `words`, as a tree of their shared starts: `re` tries each
    branch of a flat alternation at every character, and only one branch of a tree."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(rest) for char, rest in sorted(node.items()) if char]
        if not branches:
            return ""
        if "" in node:  # a shorter word ends here: the rest may be absent
            return "(?:" + "|".join(branches) + ")?"
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return re.compile(pattern(tree))


@functools.lru_cache(maxsize=8)
def _compile(values: frozenset[str]) -> _Values:
    """One lookup per set of secrets, shared by the redactors of a process."""
    return _Values(values)


def _mask_pem_tails(text: str) -> str:
    """A private key whose BEGIN line was cut off: mask its END line and the body above it."""
    for end in reversed(list(_PEM_END.finditer(text))):
        lines = text[: end.start()].split("\n")
        keep = len(lines) - 1  # the END line's own start
        while keep > 0 and _PEM_BODY_LINE.fullmatch(lines[keep - 1].strip()):
            keep -= 1
        start = len("\n".join(lines[:keep])) + (1 if keep else 0)
        text = text[:start] + MASK + text[end.end() :]
    return text


@functools.cache
def _console() -> Redactor:
    return Redactor()


def console(text: str) -> str:
    """A message for the terminal: the process environment's secrets and key shapes masked
    (used where no project is loaded yet, such as its load errors)."""
    return _console()(text)
