"""The engine's tool schemas as the REST API documents them (``gateway/api/tools.json``).

The gateway never imports the engine, so the OpenAPI document is built from this snapshot of what
a real engine lists. ``test_openapi.py`` fails when it is stale; regenerate with::

    python -m tests.gateway.api.snapshot --write
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

SNAPSHOT = Path(__file__).resolve().parents[3] / "gateway" / "api" / "tools.json"


async def listed_tools() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["-m", "engine", "--stdio", "--dir", str(Path(tmp) / "ws"), "--embedding-provider", "off"]
        async with Client(StdioServerParameters(command=sys.executable, args=argv)) as client:
            tools = (await client.list_tools()).tools
    return {
        t.name: {
            "description": t.description,
            "inputSchema": t.input_schema,
            "outputSchema": t.output_schema,
        }
        for t in sorted(tools, key=lambda t: t.name)
    }


def render(tools: dict[str, Any]) -> str:
    return json.dumps(tools, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    text = render(anyio.run(listed_tools))
    if "--write" in sys.argv:
        SNAPSHOT.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
