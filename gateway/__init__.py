"""The Almanac gateway: tenants, tokens, the engine supervisor and the MCP proxy.

It never imports ``engine``: the two talk only over the wire described in ``docs/wire.md``.
"""
