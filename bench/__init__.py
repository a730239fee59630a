"""Benchmarks (not tests): run as modules, e.g. ``python -m bench.store``."""
