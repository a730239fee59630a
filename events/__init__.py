"""The vocabulary of ta-actors: ratings, decision schemas, run configuration, domain events,
the event envelope and the append-only store. Imports nothing else of ours."""
