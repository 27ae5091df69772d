"""The REST API (``/api/v1``, ``gw:rest``): the memory tools for programs that do not speak MCP."""
