"""What an agent sees of the engine (``engine:surface``): the manual, the argument errors, what a
connection may list, log notifications and progress.

- ``manual``: server instructions, tool descriptions and described parameter types.
- ``arguments``: argument failures (missing, wrong type, unknown tool) worded like every refusal.
- ``connection``: a read-only connection lists only the tools it may call; a pinned one is told so.
- ``notify``: ``logging/setLevel``, log notifications, and progress on long calls.
- ``replies``: a request that can receive no notification is answered in one JSON body.
"""
