"""The ``/mcp`` edge: authenticate, rate-limit, forward to the engine, streaming."""
