"""Prices: uncached input, output, cache reads and cache writes are each priced at their own
rate, from the user's `[models.X]` prices or litellm's table (docs/metrics.md)."""

from __future__ import annotations

import pytest

from llmtt.agents.pricing import Pricing, Tokens, pricing_of
from llmtt.providers import import_litellm
from llmtt.spec.config import ModelSpec

TOKENS = Tokens(input=1_000, output=100, cache_read=20_000, cache_write=3_000)


def test_the_users_cache_prices_apply_to_the_cached_input() -> None:
    spec = ModelSpec(
        input_usd_per_mtok=3.0,
        output_usd_per_mtok=15.0,
        cache_read_usd_per_mtok=0.3,
        cache_write_usd_per_mtok=3.75,
    )
    pricing = pricing_of("house", {"house": spec})
    assert pricing.source == "user"
    # 1,000 x $3 + 100 x $15 + 20,000 x $0.30 + 3,000 x $3.75, per million
    assert pricing.cost(TOKENS) == pytest.approx(0.003 + 0.0015 + 0.006 + 0.01125)


def test_without_cache_prices_cached_input_costs_the_input_price() -> None:
    spec = ModelSpec(input_usd_per_mtok=2.0, output_usd_per_mtok=10.0)
    pricing = pricing_of("house", {"house": spec})
    assert pricing.cost(TOKENS) == pytest.approx((24_000 * 2.0 + 100 * 10.0) / 1e6)


def test_litellms_table_prices_cache_reads_and_writes_at_their_rates() -> None:
    name = "anthropic/claude-sonnet-4-5-20250929"
    entry = import_litellm().model_cost["claude-sonnet-4-5-20250929"]
    read, write = entry["cache_read_input_token_cost"], entry["cache_creation_input_token_cost"]
    assert read < entry["input_cost_per_token"] < write  # the rates differ: the test can fail
    pricing = pricing_of(name, {})
    assert pricing.source == "llmtt"
    expected = (
        1_000 * entry["input_cost_per_token"]
        + 100 * entry["output_cost_per_token"]
        + 20_000 * read
        + 3_000 * write
    )
    assert pricing.cost(TOKENS) == pytest.approx(expected, rel=1e-6)


def test_an_unpriced_model_has_no_cost() -> None:
    pricing = pricing_of("nobody-priced-this-model-7", {})
    assert pricing == Pricing(None)
    assert pricing.cost(TOKENS) is None
