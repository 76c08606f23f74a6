"""What a model's tokens cost, from a price table read as data: litellm is never imported.

The table is litellm's own `model_prices_and_context_window_backup.json` when litellm is
installed (found with `find_spec`, which runs none of its code), else the copy llmtt ships,
`prices.json`, cut from that same file by `scripts/prices`. An entry is applied the way litellm
1.106.2's `cost_per_token` applies it to a chat request's usage (the prompt counted whole, cache
reads and writes included):

- uncached input, output, cache reads and cache writes each at their own rate; a missing cache
  rate is the input's (fireworks_ai: a missing read rate is half the input's);
- past a `<rate>_above_<N>k_tokens` threshold of the prompt (xai: at it), each rate with such a
  key takes that tier's value, the highest threshold crossed winning;
- a `tiered_pricing` list picks one tier by the prompt's size for every token of the request;
- perplexity: the whole prompt at the input rate, the output at the output rate.

An entry priced by anything but its tokens (by the second, or at rates that depend on the hour)
has no cost here: None, like a name the table does not hold.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

Entry = Mapping[str, Any]

# The four rates a chat request's tokens are billed at, and their tiers past a prompt size.
INPUT, OUTPUT = "input_cost_per_token", "output_cost_per_token"
CACHE_READ, CACHE_WRITE = "cache_read_input_token_cost", "cache_creation_input_token_cost"
RATES = (INPUT, OUTPUT, CACHE_READ, CACHE_WRITE)
ABOVE = re.compile(rf"^({'|'.join(RATES)})_above_(\d+)(k?)_tokens$")
TIERED = "tiered_pricing"
IMAGE_OUTPUT = "output_cost_per_image_token"
# Prices that depend on more than the token counts: llmtt cannot say what such a request cost.
NOT_BY_TOKENS = ("off_peak_pricing", "cost_per_second", "input_cost_per_second")
# The entries the shipped table keeps (what an agent or the judge chats with), and their fields.
MODES = ("chat", "responses")
KEPT = (*RATES, TIERED, IMAGE_OUTPUT, *NOT_BY_TOKENS, "litellm_provider")
LITELLM_FILE = "model_prices_and_context_window_backup.json"
OWN_FILE = "prices.json"
FIREWORKS_READ_RATIO = 0.5  # litellm's FIREWORKS_AI_DEFAULT_CACHE_READ_RATE_RATIO
INCLUSIVE_THRESHOLDS = ("xai",)  # providers billing the higher tier from the threshold itself


@dataclass(frozen=True)
class PriceTable:
    """Model name -> price entry, and where the entries were read (`source`)."""

    entries: Mapping[str, Entry]
    source: str
    # The provider prefixes a name may carry (`anthropic/`, `vertex_ai/`, ...).
    providers: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "providers", _providers(self.entries))

    def entry(self, name: str) -> Entry | None:
        """The entry priced for `name`, found as litellm's cost_per_token finds it: the name
        itself, else without its provider prefix (`openai/gpt-4o` -> `gpt-4o`)."""
        found = self.entries.get(name)
        if found is None and "/" in name:
            prefix, rest = name.split("/", 1)
            if prefix in self.providers:
                found = self.entries.get(rest)
        return found if isinstance(found, Mapping) else None

    def cost(
        self, name: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_write: int = 0
    ) -> float | None:
        """USD for one request's tokens (`tokens_in`: the uncached input), or None when the
        table has no price for `name`."""
        entry = self.entry(name)
        if entry is None or any(entry.get(key) is not None for key in NOT_BY_TOKENS):
            return None
        prompt = tokens_in + cache_read + cache_write
        if entry.get("litellm_provider") == "perplexity":  # its calculator reads two rates
            input_rate, output = _rate(entry, INPUT) or 0.0, _rate(entry, OUTPUT) or 0.0
            return round(prompt * input_rate + tokens_out * output, 8)
        rates = _tier_rates(entry, prompt) or _rates(entry, prompt)
        counts = (tokens_in, tokens_out, cache_read, cache_write)
        return round(sum(n * rate for n, rate in zip(counts, rates, strict=True)), 8)


def _providers(entries: Mapping[str, Entry]) -> frozenset[str]:
    names = set()
    for entry in entries.values():
        provider = entry.get("litellm_provider") if isinstance(entry, Mapping) else None
        if isinstance(provider, str):
            names |= {provider, provider.split("-", 1)[0]}  # vertex_ai-language-models
    return frozenset(names)


def _rate(entry: Entry, key: str) -> float | None:
    value = entry.get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)  # litellm reads "3e-07" as well as 3e-07
    except (TypeError, ValueError):
        return None


def _rates(entry: Entry, prompt: int) -> tuple[float, float, float, float]:
    """(input, output, cache read, cache write) for a prompt of `prompt` tokens."""
    rates = {key: _rate(entry, key) for key in RATES}
    provider = entry.get("litellm_provider")
    input_rate = rates[INPUT]
    if provider == "fireworks_ai" and rates[CACHE_READ] is None and input_rate is not None:
        rates[CACHE_READ] = input_rate * FIREWORKS_READ_RATIO
    if not rates[OUTPUT]:  # no output rate: the output is billed as image tokens, if priced
        rates[OUTPUT] = _rate(entry, IMAGE_OUTPUT) or rates[OUTPUT]
    inclusive = provider in INCLUSIVE_THRESHOLDS
    for threshold, suffix in _thresholds(entry):
        if prompt > threshold or (inclusive and prompt == threshold):
            for key in RATES:
                tier = _rate(entry, f"{key}_above_{suffix}_tokens")
                rates[key] = rates[key] if tier is None else tier
    input_rate = rates[INPUT] or 0.0
    output = rates[OUTPUT] or 0.0
    read, write = rates[CACHE_READ], rates[CACHE_WRITE]
    return (
        input_rate,
        output,
        input_rate if read is None else read,
        input_rate if write is None else write,
    )


def _thresholds(entry: Entry) -> list[tuple[int, str]]:
    """The prompt sizes past which the entry's rates change, smallest first, with the
    `above_<suffix>_tokens` that names each."""
    found = set()
    for key, value in entry.items():
        match = ABOVE.match(key)
        if match and value is not None:
            number, k = match.group(2), match.group(3)
            found.add((int(number) * (1000 if k else 1), number + k))
    return sorted(found)


def _tier_rates(entry: Entry, prompt: int) -> tuple[float, float, float, float] | None:
    """The rates of the `tiered_pricing` tier a prompt of `prompt` tokens falls in (a tier
    holds `range_start < prompt <= range_end`; past the last, the last), or None."""
    tiers = entry.get(TIERED)
    if not isinstance(tiers, list) or not tiers or prompt <= 0:
        return None
    ranged = [t for t in tiers if isinstance(t, Mapping) and len(t.get("range", [])) == 2]
    ranged.sort(key=lambda t: t["range"][0])
    if not ranged:
        return None
    tier = next((t for t in ranged if t["range"][0] < prompt <= t["range"][1]), ranged[-1])
    if INPUT not in tier:
        return None
    input_rate = _rate(tier, INPUT) or 0.0
    # A tier listing only input rates keeps the model's output rate.
    output = (_rate(tier, OUTPUT) if OUTPUT in tier else _rate(entry, OUTPUT)) or 0.0
    read, write = _rate(tier, CACHE_READ), _rate(tier, CACHE_WRITE)
    return (
        input_rate,
        output,
        input_rate if read is None else read,
        input_rate if write is None else write,
    )


def slim(entries: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What `scripts/prices` keeps of litellm's file: the models of the modes an agent or a
    judge calls (chat, responses), with only the fields `PriceTable.cost` reads, so that each
    costs here what it costs in the whole file. (With litellm installed, its whole file is read:
    an embedding model is priced too, for the evaluator that calls one.)"""
    kept: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        if not isinstance(entry, Mapping) or entry.get("mode") not in MODES:
            continue
        kept[name] = {
            key: value
            for key, value in entry.items()
            if value is not None and (key in KEPT or ABOVE.match(key))
        }
    return kept


def litellm_file() -> Path | None:
    """litellm's own price file when litellm is installed (found without importing it)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / LITELLM_FILE
        if path.is_file():
            return path
    return None


@cache
def price_table() -> PriceTable:
    """The table every price comes from: litellm's file if installed, else llmtt's own."""
    path = litellm_file()
    if path is not None:
        return PriceTable(json.loads(path.read_text(encoding="utf-8")), str(path))
    return own_table()


@cache
def own_table() -> PriceTable:
    """The table llmtt ships (`prices.json`)."""
    own = resources.files(__package__ or "llmtt.providers").joinpath(OWN_FILE)
    data = json.loads(own.read_text(encoding="utf-8"))
    return PriceTable(data["models"], f"llmtt's {OWN_FILE} ({data['source']})")
