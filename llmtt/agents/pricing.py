"""Token figures and what they cost: a model's price per token for a CLI agent's run, and the
scripted model's, which is free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from llmtt.providers import ResolvedModel, resolve_model
from llmtt.spec.config import ModelSpec

SCRIPTED = "scripted"


@dataclass(frozen=True)
class Tokens:
    """Token figures of one model request (or of a whole run); `input` is the uncached input
    only, cache reads and writes apart (docs/metrics.md)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def fields(self) -> dict[str, int]:
        """The figures under the `usage` event's names."""
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
        }

    def plus(self, other: Tokens) -> Tokens:
        """Both together."""
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def minus(self, other: Tokens) -> Tokens:
        """What is left of these figures without `other`'s (never below 0)."""
        return Tokens(
            max(0, self.input - other.input),
            max(0, self.output - other.output),
            max(0, self.cache_read - other.cache_read),
            max(0, self.cache_write - other.cache_write),
        )

    def at_least(self, other: Tokens) -> Tokens:
        """The larger of each figure: several reports of one request, the latest most complete."""
        return Tokens(
            max(self.input, other.input),
            max(self.output, other.output),
            max(self.cache_read, other.cache_read),
            max(self.cache_write, other.cache_write),
        )


@dataclass(frozen=True)
class Pricing:
    """Who knows what the run's model costs. `source` is the usage events' `cost_source`:
    `scripted` (the free scripted model), `user` (`[models.X]` prices, or a `command` agent
    declared free), `llmtt` (litellm's price table); None: nobody priced the model and every
    cost is unknown (null), whatever the client computed itself."""

    source: str | None
    model: ResolvedModel | None = None  # None with a source: it costs nothing

    def cost(self, tokens: Tokens) -> float | None:
        """What `tokens` cost, or None when unknown; cache reads and writes at their own
        prices (litellm's, or the user's, which default to the input's)."""
        if self.source is None:
            return None
        if self.model is None:
            return 0.0
        return self.model.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)

    def price(self, input: int, output: int, cache_read: int, cache_write: int) -> float | None:
        """`cost` of these figures (the form the gateway's records are folded with)."""
        return self.cost(Tokens(input, output, cache_read, cache_write))


SCRIPTED_PRICING = Pricing(SCRIPTED)


def pricing_of(
    model: str | None, models: Mapping[str, ModelSpec], *, free: bool = False
) -> Pricing:
    """The pricing of `model`: scripted, declared free, the user's prices, litellm's table,
    else unknown."""
    if model == SCRIPTED:
        return SCRIPTED_PRICING
    if free:
        return Pricing("user")
    if model is None:
        return Pricing(None)
    resolved = resolve_model(model, models)
    if resolved.prices is not None:
        return Pricing("user", resolved)
    if resolved.cost(1, 1) is not None:  # litellm's table has the model
        return Pricing("llmtt", resolved)
    return Pricing(None)
