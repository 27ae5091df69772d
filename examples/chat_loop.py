"""A minimal agent host with Almanac as its memory: one chat turn per line of standard input.

    python examples/chat_loop.py --memory --almanac-url http://127.0.0.1:8080/mcp \\
        --model-url http://127.0.0.1:11434/v1 --model llama3.2      # token in ALMANAC_TOKEN

Before each turn the user's line is searched in memory and the ``<memory>`` block joins the system
prompt; after the reply, durable facts are extracted by the same model and saved in the background.
Without ``--memory`` the prompt is exactly what it would be without Almanac.
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio

from almanac.host import Endpoint, HostSettings, MemoryProvider, openai_chat

SYSTEM = "You are a helpful assistant. Answer briefly."


def build_prompt(message: str, block: str) -> list[dict[str, str]]:
    """The messages of one turn: the memory block, when there is one, ends the system prompt."""
    system = SYSTEM + ("\n\n" + block if block else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": message}]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", action="store_true", help="turn memory on (off by default)")
    parser.add_argument("--almanac-url", default="http://127.0.0.1:8080/mcp")
    parser.add_argument("--model-url", required=True, help="an OpenAI-compatible base URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--load-timeout", type=float, default=3.0, help="seconds to wait for memory")
    args = parser.parse_args()

    chat = openai_chat(args.model_url, args.model, api_key=os.environ.get("MODEL_API_KEY"))
    endpoint = Endpoint.service(args.almanac_url, os.environ.get("ALMANAC_TOKEN", ""))
    settings = HostSettings(enabled=args.memory, load_timeout=args.load_timeout)
    async with MemoryProvider(endpoint, settings, extract=chat) as memory:
        stdin = anyio.wrap_file(sys.stdin)
        async for line in stdin:
            message = line.strip()
            if not message:
                continue
            block = await memory.before_turn(message)
            reply = await chat(build_prompt(message, block))
            print(reply, flush=True)
            memory.after_turn(message, reply)


if __name__ == "__main__":
    anyio.run(main)
