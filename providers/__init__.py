"""LLM access for ta-actors: the request/reply contract (base), the gateway that serves every
model call (gateway), the deterministic offline provider (offline), the litellm path
(litellm_client) with its capability table, model catalog and key map.

Nothing heavy is imported here: litellm loads only when a non-offline model is first called.
"""
