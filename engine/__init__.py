"""Almanac's engine: one workspace's memory, served over MCP."""
