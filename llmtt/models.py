"""Models as litellm reaches them: names, endpoints, keys, prices, and provider errors.

litellm is imported only inside these functions (it takes ~2 s to import), never when doit
loads the task list.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmtt.config import ModelSpec

SCRIPTED = "scripted"
_FATAL_MARKERS = (
    "insufficient_quota",
    "billing",
    "credit balance",
    "quota",
    "budget",
    "missing credentials",
    "api key",
    "api_key",
    "authentication",
)


@dataclass(frozen=True)
class ResolvedModel:
    """One model, ready for a litellm call."""

    name: str
    litellm: str
    api_base: str | None
    api_key: str | None
    prices: tuple[float, float] | None  # declared USD per million tokens (input, output)
    free: bool = False

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        """What a call cost: 0 when free, declared prices, litellm's table, else None."""
        if self.free:
            return 0.0
        if self.prices is not None:
            return round((tokens_in * self.prices[0] + tokens_out * self.prices[1]) / 1e6, 8)
        litellm = import_litellm()
        try:
            parts = litellm.cost_per_token(
                model=self.litellm, prompt_tokens=tokens_in, completion_tokens=tokens_out
            )
        except Exception:  # noqa: BLE001 - litellm raises several kinds for unmapped models
            return None
        return round(float(parts[0]) + float(parts[1]), 8)


def resolve_model(
    name: str, models: Mapping[str, ModelSpec], scripted_url: str | None = None
) -> ResolvedModel:
    """`scripted` is the run's own server; `[models.<name>]` may alias, point and price."""
    if name == SCRIPTED:
        if scripted_url is None:
            raise ValueError("the scripted model needs its server's URL")
        return ResolvedModel(
            name, "openai/scripted", f"{scripted_url}/v1", "scripted", (0, 0), True
        )
    spec = models.get(name)
    if spec is None:
        return ResolvedModel(name, name, None, None, None)
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    prices = None
    if spec.input_usd_per_mtok is not None and spec.output_usd_per_mtok is not None:
        prices = (spec.input_usd_per_mtok, spec.output_usd_per_mtok)
    return ResolvedModel(name, spec.litellm or name, spec.api_base, key, prices)


def import_litellm() -> Any:
    """litellm, with its price table read from the package rather than the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def missing_key(model: ResolvedModel) -> str | None:
    """What to set before a paid model can be called, when its API key is nowhere; else None.

    litellm knows the variable each provider reads. Only key-like names count (a provider's
    `..._API_BASE` often has a default), and a model with its own `api_base` may need no key.
    """
    if model.free or model.api_key or model.api_base:
        return None
    litellm = import_litellm()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a provider list for some
            found = litellm.validate_environment(model.litellm)
    except Exception:  # noqa: BLE001 - a name litellm cannot place: let the call say what is wrong
        return None
    keys = [k for k in found.get("missing_keys") or [] if k.endswith(("_KEY", "_TOKEN"))]
    if not keys:
        return None
    table = model.name if model.name.replace("-", "_").isidentifier() else f'"{model.name}"'
    return (
        f"no API key: set {' or '.join(keys)} "
        f"(or name another variable with [models.{table}] api_key_env)"
    )


class ProviderStop(Exception):
    """A provider error that retrying cannot fix (quota, billing, authentication)."""


def complete(
    model: ResolvedModel,
    *,
    max_retries: int,
    backoff_secs: float,
    timeout_secs: float,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> Any:
    """One chat completion, retried with exponential backoff on transient provider errors."""
    litellm = import_litellm()
    fatal = (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,
        litellm.BudgetExceededError,
    )
    attempt = 0
    while True:
        try:
            return litellm.completion(
                model=model.litellm,
                api_base=model.api_base,
                api_key=model.api_key,
                timeout=timeout_secs,
                num_retries=0,
                **kwargs,
            )
        except fatal as exc:
            raise ProviderStop(f"{type(exc).__name__}: {_short(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - litellm maps provider errors to many types
            text = str(exc).lower()
            if any(marker in text for marker in _FATAL_MARKERS):
                raise ProviderStop(f"{type(exc).__name__}: {_short(exc)}") from None
            if attempt >= max_retries:
                raise ProviderStop(
                    f"gave up after {attempt + 1} attempts: {type(exc).__name__}: {_short(exc)}"
                ) from None
            sleep(backoff_secs * (2**attempt))
            attempt += 1


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 400 else text[:400] + "..."
