"""The engine's errors: one tree, each class with a stable ``code``.

::

    EngineError                      code="engine_error"
    ├── InvalidInput                 code="invalid_input"     the caller can fix the call
    │   ├── TooLong                  code="too_long"
    │   ├── BadScope                 code="bad_scope"
    │   ├── BadDate                  code="bad_date"
    │   ├── BadArgument              code="invalid_argument"  a value outside what the tool's schema allows
    │   └── BadImport                code="bad_import"        a bad import/export source, label or target
    ├── NotFound                     code="not_found"         no memory has that id
    ├── Forbidden                    code="forbidden"         the connection may not do this
    │   └── ReadOnly                 code="read_only"
    ├── NotRetired                   code="not_retired"       only a retired memory can be deleted
    ├── KeptAsIs                     code="kept_as_is"        a note whose frontmatter was not read
    ├── ImportStopped                code="import_stopped"    the engine stopped mid-import (nothing kept)
    ├── WorkspaceLocked              code="workspace_locked"  another engine serves the directory
    ├── NotAWorkspace                code="not_a_workspace"   an offline command was given another path
    └── StoreUnavailable             code="store_unavailable" the write could not be made durable

Every message says what went wrong and what to do about it. The MCP layer turns an
``EngineError`` into a tool error the model can read; nothing is written on a refusal. What reaches
a client (tool errors, the admin surface's refusals) goes through :func:`without_paths` first.
"""

from __future__ import annotations

import re

# An absolute server path inside a message (``/srv/almanac/embed.sock``): never shown to clients.
_SERVER_PATH = re.compile(r"(?<![\w:/.~-])/[^\s'\"`,;()\[\]]+")


def without_paths(text: str) -> str:
    """``text`` with every absolute path replaced by ``<server path>`` (URLs and relative paths
    such as ``notes/2026/x.md`` are kept): what a client may be shown of a server's message."""
    return _SERVER_PATH.sub("<server path>", text)


class EngineError(Exception):
    code = "engine_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(EngineError):
    code = "invalid_input"


class TooLong(InvalidInput):
    code = "too_long"


class BadScope(InvalidInput):
    code = "bad_scope"


class BadDate(InvalidInput):
    code = "bad_date"


class BadArgument(InvalidInput):
    """A value the tool's published schema does not allow (the same code as a schema failure)."""

    code = "invalid_argument"


class BadImport(InvalidInput):
    code = "bad_import"


class NotFound(EngineError):
    code = "not_found"


class Forbidden(EngineError):
    code = "forbidden"


class ReadOnly(Forbidden):
    code = "read_only"


class NotRetired(EngineError):
    code = "not_retired"


class KeptAsIs(EngineError):
    """A note whose frontmatter was past the YAML limits: its file is never rewritten."""

    code = "kept_as_is"


class ImportStopped(EngineError):
    """The engine began to stop (its gateway went away, or asked) while an import was staging:
    the import was abandoned whole."""

    code = "import_stopped"


class WorkspaceLocked(EngineError):
    code = "workspace_locked"


class NotAWorkspace(EngineError):
    code = "not_a_workspace"


class StoreUnavailable(EngineError):
    code = "store_unavailable"
