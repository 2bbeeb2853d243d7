"""Users authorize the gateway to their own upstream MCP servers, per the MCP authorization spec.

A user's server configured with `"oauth": {...}` is an OAuth 2.1 protected resource the gateway
reaches as that user's client: `protocol.py` speaks to its authorization server (discovery,
registration, authorization code with PKCE, refresh), `credentials.py` keeps each user's tokens
(encrypted in the registry) and hands them to the gateway, `pages.py` serves the connect page
that only its tenant can complete and the callback that ends the flow.
"""
