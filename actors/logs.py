"""Structured logs for the actor processes: one JSON object per line on the worker's stderr,
which Ray keeps in its session log folder (`/tmp/ray/session_latest/logs/worker-*.err`).

Logs are for operating the system (what was dispatched, refused, retried, how a run ended);
the record of a run is its events. Nothing secret is logged: no keys, no prompts.
Level: TA_ACTORS_LOG_LEVEL (default INFO)."""
from __future__ import annotations

import logging
import sys

import structlog

from events.settings import setting


def configure() -> None:
    level = getattr(logging, setting("TA_ACTORS_LOG_LEVEL").upper(), logging.INFO)
    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True)
