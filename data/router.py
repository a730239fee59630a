"""Ordered fallback over vendors: the first vendor with data answers.

Why the distinctions: "no data" from a vendor is an answer (the model must be told nobody
has it, so it does not invent numbers); "not configured" is no answer (skip silently); a
rate limit or a crash is a real error, surfaced as DataError only when nobody answered at all,
so one flaky vendor never hides another vendor's data."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from events.errors import flatten

from .model import AuthFailed, NoData, NotConfigured, RateLimited


class DataError(RuntimeError):
    """No vendor answered at all; the message names the first real error, on one line."""


@dataclass
class Answer:
    vendor: str | None          # None: nobody had data
    value: Any = None
    reasons: list[str] = field(default_factory=list)  # why earlier vendors did not answer

    @property
    def found(self) -> bool:
        return self.vendor is not None


def route(vendors: Sequence[Any], capability: str, call: Callable[..., Any],
          what: str, *, with_name: bool = False) -> Answer:
    """Try ``call(vendor.<capability>)`` on each vendor in order (``with_name``:
    ``call(fn, vendor.name)``, for checks whose message names the vendor).

    ``call`` applies the request and any look-ahead filtering, and raises NoData when what is
    left is empty, so an all-future answer falls through to the next vendor too."""
    reasons: list[str] = []
    errors: list[str] = []
    answered = False
    for vendor in vendors:
        fn = getattr(vendor, capability, None)
        if fn is None:
            reasons.append(f"{vendor.name}: does not provide {capability}")
            continue
        try:
            value = call(fn, vendor.name) if with_name else call(fn)
        except NotConfigured as exc:
            reasons.append(flatten(f"{vendor.name}: not configured ({exc})"))
        except NoData as exc:
            answered = True
            reasons.append(flatten(f"{vendor.name}: {exc}"))
        except RateLimited as exc:
            errors.append(flatten(f"{vendor.name}: rate limited ({exc})"))
        except AuthFailed as exc:
            errors.append(flatten(f"{vendor.name}: authentication failed ({exc})"))
        except Exception as exc:  # a vendor's failure must not take the run down
            errors.append(flatten(f"{vendor.name}: {type(exc).__name__}: {exc}"))
        else:
            return Answer(vendor.name, value, reasons + errors)
    if errors and not answered:
        raise DataError(flatten(f"no vendor could provide {what}; first error: {errors[0]}"))
    return Answer(None, None, reasons + errors)
