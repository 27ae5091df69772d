"""Almanac's client side: pieces that run inside other programs and reach Almanac over MCP.

Nothing here imports the server packages (``engine``, ``gateway``); a test walks the imports.
"""
