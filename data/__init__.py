"""Market data for the analysts: vendors behind one router, indicators, the verified snapshot,
symbol normalisation and a DuckDB download cache. Imports events/ and third-party libs only."""
