"""Moving a workspace's memories in and out as files (``life:import``, ``life:export``).

- :mod:`engine.transfer.sources`: a folder or a zip read as relative paths that cannot escape.
- :mod:`engine.transfer.archive`: export the store as a zip with a manifest; restore such a zip
  into an empty workspace, byte for byte (export → import reproduces every memory).
- :mod:`engine.transfer.markdown`: import a folder or zip of Markdown (an Obsidian vault, another
  tool's export) as notes under ``notes/Imported/<label>/``.

All of it runs with the workspace's lock held (the engine is stopped), writes into a staging
folder first and moves it into place at the end, so a refused or failed import changes nothing.
"""
