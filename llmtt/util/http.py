"""What HTTP headers say, read the same way wherever llmtt meets them."""

from __future__ import annotations

import email.utils
import time


def retry_after_secs(value: str | None) -> float | None:
    """A `Retry-After` header in seconds from now: a number of seconds, or an HTTP date;
    None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
