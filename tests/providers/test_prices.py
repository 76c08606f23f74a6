"""Prices: uncached input, output, cache reads and cache writes are each priced at their own
rate, from the user's `[models.X]` prices or the price table (docs/metrics.md): litellm's own
file read as data, or llmtt's copy of it, applied as litellm's cost_per_token applies it."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conftest import without_litellm

from llmtt.agents.pricing import Pricing, Tokens, pricing_of
from llmtt.providers import import_litellm
from llmtt.providers.prices import (
    MODES,
    NOT_BY_TOKENS,
    PriceTable,
    litellm_file,
    own_table,
    price_table,
    slim,
)
from llmtt.spec.config import ModelSpec

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_price_table_prices_cache_reads_and_writes_at_their_rates() -> None:
    name = "anthropic/claude-sonnet-4-5-20250929"
    entry = price_table().entries["claude-sonnet-4-5-20250929"]
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


# A table of made-up models, one rule each, read as the real table is.
RULES = PriceTable(
    {
        "plain": {
            "litellm_provider": "acme",
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
        },
        "cached": {
            "litellm_provider": "acme",
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
            "cache_read_input_token_cost": 1e-7,
            "cache_creation_input_token_cost": 1.25e-6,
        },
        "long": {
            "litellm_provider": "acme",
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
            "cache_read_input_token_cost": 1e-7,
            "input_cost_per_token_above_200k_tokens": 2e-6,
            "output_cost_per_token_above_200k_tokens": 3e-6,
            "input_cost_per_token_above_272k_tokens": 4e-6,
        },
        "xai/grok": {
            "litellm_provider": "xai",
            "input_cost_per_token": 1e-6,
            "input_cost_per_token_above_200k_tokens": 2e-6,
        },
        "fw": {"litellm_provider": "fireworks_ai", "input_cost_per_token": 1e-6},
        "tiers": {
            "litellm_provider": "dashscope",
            "output_cost_per_token": 9e-6,
            "tiered_pricing": [
                {"range": [0, 1000], "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
                {"range": [1000, 5000], "input_cost_per_token": 3e-6},
            ],
        },
        "hourly": {
            "litellm_provider": "acme",
            "input_cost_per_token": 1e-6,
            "off_peak_pricing": {"windows": []},
        },
        "sonar": {
            "litellm_provider": "perplexity",
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
            "cache_read_input_token_cost": 1e-9,
        },
    },
    "made up",
)


@pytest.mark.parametrize(
    ("name", "tokens", "usd"),
    [
        # a name, or a known provider's prefix before one; nothing else
        ("plain", (1000, 100, 0, 0), 1000e-6 + 200e-6),
        ("acme/plain", (1000, 100, 0, 0), 1000e-6 + 200e-6),
        ("other/plain", (1000, 100, 0, 0), None),
        ("missing", (1000, 100, 0, 0), None),
        # no cache rates: cached input at the input rate; with them, at theirs
        ("plain", (1000, 0, 500, 300), 1800e-6),
        ("cached", (1000, 0, 500, 300), 1000e-6 + 500e-7 + 300 * 1.25e-6),
        # the whole prompt (cache included) decides the tier: 200,000 is not past it, 200,001 is
        ("long", (150_000, 10, 50_000, 0), 150_000e-6 + 10 * 2e-6 + 50_000e-7),
        ("long", (150_001, 10, 50_000, 0), 150_001 * 2e-6 + 10 * 3e-6 + 50_000e-7),
        # past 272k the input takes that tier's rate, the output keeps the 200k tier's
        ("long", (300_000, 10, 0, 0), 300_000 * 4e-6 + 10 * 3e-6),
        # xai bills the higher tier from the threshold itself
        ("xai/grok", (200_000, 0, 0, 0), 200_000 * 2e-6),
        # fireworks_ai: a cache read without its own rate is half the input's
        ("fw", (0, 0, 1000, 0), 1000 * 0.5e-6),
        # tiered_pricing: one tier for the whole request; missing rates are that tier's input
        ("tiers", (500, 100, 200, 0), 700e-6 + 100 * 2e-6),
        ("tiers", (2000, 100, 0, 0), 2000 * 3e-6 + 100 * 9e-6),
        ("tiers", (9000, 0, 0, 0), 9000 * 3e-6),  # past the last range: the last tier
        # priced by the hour: unknown here
        ("hourly", (1000, 0, 0, 0), None),
        # perplexity bills the whole prompt at the input rate
        ("sonar", (1000, 100, 500, 0), 1500e-6 + 200e-6),
    ],
)
def test_each_pricing_rule(name: str, tokens: tuple[int, int, int, int], usd: float | None) -> None:
    cost = RULES.cost(name, *tokens)
    assert cost == (None if usd is None else pytest.approx(usd, abs=1e-8))


def priced_names(table: PriceTable) -> list[str]:
    return [n for n, e in table.entries.items() if isinstance(e, dict) and e.get("mode") in MODES]


def mixes(entry: dict[str, Any], rng: random.Random) -> list[tuple[int, int, int, int]]:
    """Token figures (uncached in, out, cache read, cache write) for one entry: two at random,
    and around each prompt size where its rates change (at it, just past it, far past it)."""
    found = [
        (rng.randrange(50_000), rng.randrange(20_000), rng.randrange(80_000), rng.randrange(20_000))
        for _ in range(2)
    ]
    sizes = {
        int(m[1]) * (1000 if m[2] else 1)
        for k in entry
        if (m := re.search(r"_above_(\d+)(k?)_tokens$", k))
    }
    sizes |= {int(t["range"][1]) for t in entry.get("tiered_pricing") or []}
    for size in sorted(sizes):
        read = rng.randrange(size // 2)
        for prompt in (size, size + 1, size * 2):
            found.append((prompt - read, rng.randrange(10_000), read, 0))
    return found


# litellm tries to sign in to GitHub or ChatGPT (over the network, seconds each) to place these
# names before it fails to; llmtt prices them from their entries, like any other.
SIGNS_IN = ("github_copilot/", "chatgpt/")


def test_the_cost_is_litellms_over_every_chat_model_of_its_table() -> None:
    """Every chat model of litellm's table at seeded token figures, past every threshold too:
    llmtt's cost is litellm.cost_per_token's, but where litellm cannot tell a name's provider
    (it raises; llmtt prices the entry the name names) and where an entry is priced by the
    second or the hour (litellm: 0 or the rate of the moment; llmtt: unknown)."""
    litellm = import_litellm("comparing prices")
    table = price_table()
    assert table.source == str(litellm_file())  # litellm is installed here: its own file
    rng = random.Random(26)
    seen: Counter[str] = Counter()
    wrong = []
    asked = 0
    for name in priced_names(table):
        entry = table.entries[name]
        if name.startswith(SIGNS_IN):
            seen["not asked: litellm would sign in"] += 1
            continue
        kinds = set()
        for tokens_in, tokens_out, read, write in mixes(entry, rng):
            asked += 1
            ours = table.cost(name, tokens_in, tokens_out, read, write)
            try:
                parts = litellm.cost_per_token(
                    model=name,
                    prompt_tokens=tokens_in + read + write,
                    completion_tokens=tokens_out,
                    cache_read_input_tokens=read,
                    cache_creation_input_tokens=write,
                )
            except Exception:  # noqa: BLE001 - litellm raises several kinds for a name it cannot place
                kinds.add("litellm cannot place the name" if ours is not None else "both unknown")
                continue
            theirs = float(parts[0]) + float(parts[1])
            if ours is None and any(entry.get(k) is not None for k in NOT_BY_TOKENS):
                kinds.add("priced by the second or the hour")
            elif ours is None or abs(ours - theirs) > 1e-8 + 1e-9 * theirs:
                wrong.append((name, (tokens_in, tokens_out, read, write), ours, theirs))
            else:
                kinds.add("agree")
        assert len(kinds) == 1, (name, kinds)  # one verdict for every token figure of a model
        seen[kinds.pop()] += 1
    assert not wrong, f"{len(wrong)} differ: {wrong[:5]}"
    assert seen["agree"] >= 0.9 * sum(seen.values()), seen
    assert seen["priced by the second or the hour"] < 60, seen
    print(f"{asked} token figures over {sum(seen.values())} models: {dict(seen)}")


def test_llmtts_own_table_is_litellms_cut_by_scripts_prices() -> None:
    """prices.json is what `scripts/prices` makes of the pinned litellm's file, and each of its
    models costs there what it costs in the whole file."""
    data = json.loads((ROOT / "llmtt/providers/prices.json").read_text())
    assert (
        data["source"]
        == f"litellm {version('litellm')}, model_prices_and_context_window_backup.json"
    ), "prices.json is from another litellm: run scripts/prices"
    path = litellm_file()
    assert path is not None
    whole = PriceTable(json.loads(path.read_text()), str(path))
    own = own_table()
    assert own.entries == slim(whole.entries)
    assert len(own.entries) > 3000
    rng = random.Random(3)
    for name in own.entries:
        for tokens in mixes(dict(whole.entries[name]), rng):
            assert own.cost(name, *tokens) == whole.cost(name, *tokens), name


PRICE_A_CLI_AGENTS_RUN = """
import sys
from llmtt.agents.pricing import Tokens, pricing_of
from llmtt.providers.prices import price_table
pricing = pricing_of("anthropic/claude-sonnet-4-5", {})
print(pricing.source, pricing.cost(Tokens(1000, 100, 20000, 3000)), price_table().source)
print("litellm imported" if "litellm" in sys.modules else "litellm not imported")
if sys.argv[1:] == ["blocked"]:
    try:
        import litellm
    except ModuleNotFoundError:
        print("no litellm")
"""


@pytest.mark.parametrize("installed", [True, False])
def test_a_cli_agents_cost_never_imports_litellm(tmp_path: Path, installed: bool) -> None:
    env = {**os.environ, **({} if installed else without_litellm(tmp_path))}
    done = subprocess.run(
        [sys.executable, "-c", PRICE_A_CLI_AGENTS_RUN, "installed" if installed else "blocked"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    priced, imported, *rest = done.stdout.splitlines()
    source, cost, table = priced.split(" ", 2)
    # 1,000 x $3 + 100 x $15 + 20,000 x $0.30 + 3,000 x $3.75, per million
    assert (source, float(cost)) == ("llmtt", pytest.approx(0.02175))
    assert imported == "litellm not imported"
    if installed:
        assert table.endswith("litellm/model_prices_and_context_window_backup.json") and not rest
    else:
        assert table.startswith("llmtt's prices.json (litellm 1.106.2") and rest == ["no litellm"]


def test_litellm_loads_no_env_file_above_its_install(tmp_path: Path) -> None:
    # In its default "DEV" mode litellm, as it is imported, loads the first `.env` found above
    # its own files into the environment: a project's, when the virtualenv is inside it, and
    # with it perhaps LLMTT_ENABLED=1 or a key the user never switched on. llmtt imports it out
    # of that mode. Here a `.env` beside the installed package, which it would reach first,
    # and a script as doit is one (from `python -c`, python-dotenv looks in the working folder).
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    dotenv = Path(spec.origin).parent.parent / ".env"
    assert not dotenv.exists(), f"{dotenv} is in the way of this test"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\nfrom llmtt.providers import import_litellm\nimport_litellm('a test')\n"
        "print(os.environ.get('LLMTT_TEST_DOTENV', 'unset'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_MODE"}
    said = []
    try:
        dotenv.write_text("LLMTT_TEST_DOTENV=loaded\n")
        # The control, litellm in its DEV mode: the file is where it looks.
        for mode in ({"LITELLM_MODE": "DEV"}, {}):
            done = subprocess.run(
                [sys.executable, str(probe)],
                capture_output=True,
                text=True,
                env={**env, **mode},
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            said.append(done.stdout.split()[-1])
    finally:
        dotenv.unlink()
    assert said == ["loaded", "unset"]
