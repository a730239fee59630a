"""Ray actors: the event-store actor, the LLM gateway, the market-data actor, the role actors
and the coordinator. The only package that imports Ray."""
