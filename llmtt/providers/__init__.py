"""Models as litellm reaches them: names, endpoints, keys, prices, and provider errors.

litellm is optional (`pip install 'llmtt[litellm]'`): the litellm agent, the judge and the
evaluators that call a model need it; prices do not (`prices`, a table read as data). It is
imported only inside the functions that call a model (it takes seconds to import), never when
doit loads the task list; where it is missing, they say what to install (LlmttError).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmtt.errors import LlmttError
from llmtt.providers.prices import price_table
from llmtt.spec.config import ModelSpec
from llmtt.util.http import retry_after_secs

SCRIPTED = "scripted"
LITELLM_INSTALL = "pip install 'llmtt[litellm]'"
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
    # Declared USD per million tokens: (input, output, cache read, cache write).
    prices: tuple[float, float, float, float] | None
    free: bool = False
    api_key_env: str | None = None  # the variable `[models.X]` names for the key

    def cost(
        self, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_write: int = 0
    ) -> float | None:
        """What a call cost: 0 when free, declared prices, the price table, else None.
        `tokens_in` is the uncached input; cache reads and writes are priced apart."""
        if self.free:
            return 0.0
        if self.prices is not None:
            counts = (tokens_in, tokens_out, cache_read, cache_write)
            return round(sum(n * p for n, p in zip(counts, self.prices, strict=True)) / 1e6, 8)
        return price_table().cost(self.litellm, tokens_in, tokens_out, cache_read, cache_write)


def resolve_model(
    name: str, models: Mapping[str, ModelSpec], scripted_url: str | None = None
) -> ResolvedModel:
    """`scripted` is the run's own server; `[models.<name>]` may alias, point and price."""
    if name == SCRIPTED:
        if scripted_url is None:
            raise ValueError("the scripted model needs its server's URL")
        return ResolvedModel(
            name, "openai/scripted", f"{scripted_url}/v1", "scripted", (0, 0, 0, 0), True
        )
    spec = models.get(name)
    if spec is None:
        return ResolvedModel(name, name, None, None, None)
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    prices = None
    if spec.input_usd_per_mtok is not None and spec.output_usd_per_mtok is not None:
        cache_read, cache_write = spec.cache_read_usd_per_mtok, spec.cache_write_usd_per_mtok
        prices = (
            spec.input_usd_per_mtok,
            spec.output_usd_per_mtok,
            spec.input_usd_per_mtok if cache_read is None else cache_read,
            spec.input_usd_per_mtok if cache_write is None else cache_write,
        )
    return ResolvedModel(
        name, spec.litellm or name, spec.api_base, key, prices, api_key_env=spec.api_key_env
    )


@dataclass(frozen=True)
class Endpoint:
    """How an agent CLI reaches a model: the name it passes (`model`), the base URL of a
    gateway, proxy or the scripted server (None: the CLI's own provider), and the API key with
    the variable that holds it (`key_env`; None when llmtt sets the key itself)."""

    model: str
    base_url: str | None = None
    key_env: str | None = None
    key: str | None = None
    scripted: bool = False


def endpoint_of(
    name: str,
    models: Mapping[str, ModelSpec],
    env: Mapping[str, str],
    scripted_url: str | None = None,
) -> Endpoint:
    """`[models.<name>]`'s endpoint for the agent CLIs; the key is looked up in `env` (the
    run's environment) before the caller's."""
    if name == SCRIPTED:
        if scripted_url is None:
            raise ValueError("the scripted model needs its server's URL")
        return Endpoint(SCRIPTED, f"{scripted_url}/v1", None, "scripted", scripted=True)
    spec = models.get(name)
    if spec is None:
        return Endpoint(name)
    key = None
    if spec.api_key_env:
        key = env.get(spec.api_key_env) or os.environ.get(spec.api_key_env)
    return Endpoint(spec.id or name, spec.api_base, spec.api_key_env, key)


def litellm_missing(who: str) -> str | None:
    """What to say when litellm is not installed (looked for without importing it): `who`
    (e.g. "the judge") needs it, and the command that installs it; None when it is."""
    try:
        found = importlib.util.find_spec("litellm") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"{who} needs litellm: {LITELLM_INSTALL}"


def import_litellm(who: str) -> Any:
    """litellm, with its price table read from the package rather than the network; where it
    is missing, an LlmttError saying that `who` (e.g. "the judge") needs it."""
    missing = litellm_missing(who)
    if missing is not None:
        raise LlmttError(missing)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Not in its "DEV" mode, where it loads the first `.env` above its own install into the
    # environment (a project's, when the virtualenv is in it): keys, or LLMTT_ENABLED=1, would
    # reach every later process without the user's switch.
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    try:
        import litellm
    except ImportError as exc:  # installed, but broken: say so, with the same fix
        raise LlmttError(
            f"{who} needs litellm, which fails to import ({exc}): {LITELLM_INSTALL}"
        ) from None
    litellm.suppress_debug_info = True
    return litellm


def missing_key(model: ResolvedModel, who: str = "checking a model's API key") -> str | None:
    """What to set before a paid model can be called, when its API key is nowhere; else None.

    A model whose `[models.X]` names a key variable needs that one. Otherwise litellm knows
    the variable each provider reads: only key-like names count (a provider's `..._API_BASE`
    often has a default), and a model with its own `api_base` may need no key. That asks
    litellm: LlmttError naming `who` when it is not installed.
    """
    if model.free or model.api_key:
        return None
    if model.api_key_env:
        return f"no API key: set {model.api_key_env} ([models.{toml_key(model.name)}] api_key_env)"
    if model.api_base:
        return None
    litellm = import_litellm(who)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a provider list for some
            found = litellm.validate_environment(model.litellm)
    except Exception:  # noqa: BLE001 - a name litellm cannot place: let the call say what is wrong
        return None
    keys = [k for k in found.get("missing_keys") or [] if k.endswith(("_KEY", "_TOKEN"))]
    if not keys:
        return None
    return (
        f"no API key: set {' or '.join(keys)} "
        f"(or name another variable with [models.{toml_key(model.name)}] api_key_env)"
    )


def spending_refusal(model: ResolvedModel, who: str) -> str | None:
    """Why `who` (e.g. "the judge") may not call `model` now: no litellm to call it with, a
    paid model without LLMTT_ENABLED=1, or no key; None when it may."""
    missing = litellm_missing(who)
    if missing is not None:
        return missing
    if not model.free and os.environ.get("LLMTT_ENABLED") != "1":
        return f"{who} ({model.name}) can spend money; set LLMTT_ENABLED=1"
    missing = missing_key(model, who)
    return f"{who} ({model.name}) cannot run: {missing}" if missing else None


def toml_key(name: str) -> str:
    """`name` as a key of a TOML table header: bare when it can be, else quoted."""
    return name if name.replace("-", "_").isidentifier() else json.dumps(name)


def first_message(response: Any) -> Any | None:
    """The message of a chat completion's first choice, or None when the answer has none (a
    gateway that answers 200 with an empty `choices`): paid for, and nothing to read."""
    choices = getattr(response, "choices", None) or []
    return getattr(choices[0], "message", None) if choices else None


def answer_text(response: Any) -> str:
    """The text of a chat completion's answer; empty when it has none."""
    content = getattr(first_message(response), "content", None)
    return content if isinstance(content, str) else ""


class ProviderStop(Exception):
    """A provider error that retrying cannot fix (quota, billing, authentication)."""


class ProviderGaveUp(ProviderStop):
    """Transient provider errors (5xx, timeouts) on every attempt made; `out_of_time`: the
    attempts ended because the deadline came, not because the retries were used up."""

    def __init__(self, message: str, *, out_of_time: bool = False) -> None:
        super().__init__(message)
        self.out_of_time = out_of_time


# How long after its own timeout an attempt under a deadline may take to report it.
DEADLINE_GRACE_SECS = 0.5


def complete(
    model: ResolvedModel,
    *,
    max_retries: int,
    backoff_secs: float,
    timeout_secs: float,
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> Any:
    """One chat completion, retried with exponential backoff on transient provider errors.

    With a `deadline` (a time.monotonic() value), nothing waits past it: each attempt's
    timeout ends there at the latest, even for an endpoint that answers a byte at a time, and
    a retry whose backoff would end after it is not made (ProviderGaveUp, `out_of_time`).
    """
    litellm = import_litellm(f"a request to the model {model.name!r}")
    fatal = (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,
        litellm.BudgetExceededError,
    )

    def call(timeout: float) -> Any:
        return litellm.completion(
            model=model.litellm,
            api_base=model.api_base,
            api_key=model.api_key,
            timeout=timeout,
            num_retries=0,
            **kwargs,
        )

    attempt = 0
    while True:
        try:
            if deadline is None:
                return call(timeout_secs)
            return _before(deadline, timeout_secs, call)
        except fatal as exc:
            raise ProviderStop(f"{type(exc).__name__}: {_short(exc)}") from None
        except _OutOfTime:
            raise ProviderGaveUp(
                f"no answer in the time left (attempt {attempt + 1})", out_of_time=True
            ) from None
        except Exception as exc:  # noqa: BLE001 - litellm maps provider errors to many types
            text = str(exc).lower()
            if any(marker in text for marker in _FATAL_MARKERS):
                raise ProviderStop(f"{type(exc).__name__}: {_short(exc)}") from None
            error = f"{type(exc).__name__}: {_short(exc)}"
            # A provider that says when to come back (429's Retry-After) is taken at its word.
            delay = max(backoff_secs * (2**attempt), _retry_after(exc) or 0.0)
            now = time.monotonic()
            if attempt >= max_retries and (deadline is None or now < deadline):
                raise ProviderGaveUp(f"gave up after {attempt + 1} attempts: {error}") from None
            if deadline is not None and now + delay >= deadline:
                raise ProviderGaveUp(
                    f"no time left to retry after {attempt + 1} attempts: {error}",
                    out_of_time=True,
                ) from None
            sleep(delay)
            attempt += 1


def _retry_after(exc: Exception) -> float | None:
    """The seconds a provider's error asks to wait (its Retry-After header), if it says.
    litellm keeps the provider's headers in `litellm_response_headers` (its `response` is one
    it made itself, without them)."""
    response = getattr(exc, "response", None)
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(response, "headers", None),
    ):
        try:
            value = headers.get("retry-after") if headers else None
        except (AttributeError, TypeError):
            continue
        if isinstance(value, str):
            return retry_after_secs(value)
    return None


class _OutOfTime(Exception):
    """An attempt still had no answer at the deadline."""


def _before(deadline: float, timeout_secs: float, call: Callable[[float], Any]) -> Any:
    """`call(timeout)` with its timeout ending by `deadline`, abandoned if still running then.

    The HTTP client's timeout bounds each wait for a byte, not the whole answer: the call runs
    in a thread of its own, left behind (a daemon) if the endpoint keeps it busy past the
    deadline.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise _OutOfTime
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["answer"] = call(min(timeout_secs, left))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=attempt, name="llmtt-model-request", daemon=True)
    thread.start()
    thread.join(min(timeout_secs, left) + DEADLINE_GRACE_SECS)
    if thread.is_alive():
        if time.monotonic() >= deadline:
            raise _OutOfTime
        raise TimeoutError(f"no complete answer within {timeout_secs:g}s")  # retried
    if "error" in box:
        raise box["error"]
    return box["answer"]


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 400 else text[:400] + "..."
