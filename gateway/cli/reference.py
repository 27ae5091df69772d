"""``docs/cli.md``: the CLI reference, generated from every command's ``--help``.

    python -m gateway.cli.reference > docs/cli.md        (or: make docs)

A test regenerates it and fails when the file in the repository differs."""

from __future__ import annotations

import sys

import click

WIDTH = 100
HEADER = """# CLI reference

Generated from `almanac … --help` by `make docs` (`python -m gateway.cli.reference > docs/cli.md`);
a test fails when this file is stale. The configuration every command reads is in
[configuration.md](configuration.md).
"""


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group`` (the group itself first), in the order they are shown."""
    found: list[tuple[str, ...]] = [prefix]
    for name in group.list_commands(click.Context(group)):
        command = group.commands[name]
        if isinstance(command, click.Group):
            found += commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def help_text(root: click.Group, path: tuple[str, ...]) -> str:
    ctx = click.Context(
        root,
        info_name="almanac",
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        help_option_names=["-h", "--help"],
    )
    command: click.Command = root
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
        ctx = click.Context(
            command, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH
        )
    return command.get_help(ctx)


def render(root: click.Group) -> str:
    parts = [HEADER]
    for path in commands(root):
        title = " ".join(("almanac", *path))
        parts.append(f"\n## `{title}`\n\n```text\n{help_text(root, path)}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    from gateway.cli import main

    sys.stdout.write(render(main))
