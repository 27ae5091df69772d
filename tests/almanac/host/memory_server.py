"""A second MCP memory server, written for the tests: ``memory_search`` and ``memory_save`` over
stdio, built with the ``mcp`` SDK, speaking the text format Headroom's server answers in.

    python -m tests.almanac.host.memory_server --dir PATH

Like Headroom without its embedding model, it starts, completes its handshake and advertises both
tools, while every call fails until it is "set up": until ``PATH/model.bin`` exists. Memories are
kept in ``PATH/memories.jsonl``; a search ranks them by the share of the query's words they hold.
``PATH/hang`` makes every call wait (for the provider's time bound). Each call is appended to
``PATH/calls.jsonl`` (tool name, arguments and time) so a test can see what the provider sent.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def build(root: Path) -> MCPServer:
    server = MCPServer("test-memory")
    store = root / "memories.jsonl"

    def ready(tool: str, arguments: dict[str, object]) -> None:
        with (root / "calls.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": tool, "arguments": arguments, "ts": time.time()}) + "\n")
        while (root / "hang").exists():
            time.sleep(0.05)
        if not (root / "model.bin").exists():
            raise ToolError("embedding model not found: run `memory stats` once with network access")

    @server.tool(description="Search saved memories by meaning.")
    def memory_search(query: str, top_k: int = 5) -> str:
        ready("memory_search", {"query": query, "top_k": top_k})
        asked = words(query)
        memories = [json.loads(line)["content"] for line in store.open()] if store.exists() else []
        scored = sorted(
            ((len(asked & words(m)) / max(len(asked), 1), m) for m in memories),
            key=lambda pair: -pair[0],
        )
        hits = [(score, m) for score, m in scored if score > 0][:top_k]
        if not hits:
            return "No memories found."
        return "\n".join(f"{n}. [relevance={score:.2f}] {m}" for n, (score, m) in enumerate(hits, 1))

    @server.tool(description="Save one memory.")
    def memory_save(content: str) -> str:
        ready("memory_save", {"content": content})
        with store.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"content": content}) + "\n")
        return "Saved."

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    build(args.dir).run("stdio")


if __name__ == "__main__":
    main()
