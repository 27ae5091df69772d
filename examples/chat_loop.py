"""A minimal agent host with memory: one chat turn per line of standard input.

    python examples/chat_loop.py --config app.json --workspace-config ws/config.json \\
        --almanac-url http://127.0.0.1:8080/mcp \\
        --model-url http://127.0.0.1:11434/v1 --model llama3.2      # token in ALMANAC_TOKEN

Memory settings come from two layers: ``memory`` in the instance file (``--config``) and
``defaults.memory`` in the workspace file (``--workspace-config``); both may be JSON or TOML. With
neither turning ``enabled`` on, the prompt is exactly what it would be without memory. The
``provider`` setting picks Almanac (``--almanac-url``, or ``--almanac-dir`` for a local folder) or
another MCP memory server (``--mcp-command``, Headroom's tool names). At start it prints the
provider's state and notes and where each setting came from, then a line ``---``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import anyio

from almanac.host import (
    AlmanacProvider,
    Endpoint,
    Layered,
    McpMemoryProvider,
    MemoryProvider,
    Provider,
    load_settings,
    openai_chat,
)

SYSTEM = "You are a helpful assistant. Answer briefly."


def build_prompt(message: str, block: str) -> list[dict[str, str]]:
    """The messages of one turn: the memory block, when there is one, ends the system prompt."""
    system = SYSTEM + ("\n\n" + block if block else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": message}]


def chosen(args: argparse.Namespace, name: str) -> Provider:
    if name == "mcp":
        if not args.mcp_command:
            sys.exit("provider is mcp: give the memory server's command with --mcp-command")
        return McpMemoryProvider(Endpoint(command=tuple(shlex.split(args.mcp_command))))
    if args.almanac_dir:
        return AlmanacProvider.folder(args.almanac_dir)
    return AlmanacProvider.service(args.almanac_url, os.environ.get("ALMANAC_TOKEN", ""))


def settings_table(layered: Layered) -> list[str]:
    rows = [
        (key, str(value).lower() if isinstance(value, bool) else str(value), origin)
        for key, value, origin in layered.rows()
    ]
    width = max(len(key) for key, _, _ in rows)
    return [f"  {key:<{width}}  {value:<10} {origin}" for key, value, origin in rows]


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", type=Path, help="the instance config file (memory settings under memory)")
    parser.add_argument("--workspace-config", type=Path, help="the workspace config file (defaults.memory)")
    parser.add_argument("--almanac-url", default="http://127.0.0.1:8080/mcp")
    parser.add_argument("--almanac-dir", help="a local Almanac folder, served with no server")
    parser.add_argument("--mcp-command", help="the command that runs another MCP memory server")
    parser.add_argument("--model-url", required=True, help="an OpenAI-compatible base URL")
    parser.add_argument("--model", required=True)
    args = parser.parse_args()

    layered = load_settings(args.config, args.workspace_config)  # read once, as the session starts
    settings = layered.settings
    chat = openai_chat(args.model_url, args.model, api_key=os.environ.get("MODEL_API_KEY"))
    async with MemoryProvider(chosen(args, settings.provider), settings, extract=chat) as memory:
        state = await memory.state()
        if state is None:
            print("memory: off (nothing is called)")
        else:
            print(f"memory: on, provider {memory.provider.name}: {state}")
            print(*(f"  note: {line}" for line in memory.provider.notes().lines()), sep="\n")
        print("settings:", *settings_table(layered), "---", sep="\n", flush=True)
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
