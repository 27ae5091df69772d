"""Build step that pyproject.toml cannot express: ship the top-level ``migrations/`` in the wheel.

The SQL files stay at the top of the repository (one place to read them); a wheel carries them as
``gateway/control/migrations/``, where ``gateway.control.migrate`` looks first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithMigrations(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the top-level folder in place
            return
        target = Path(self.build_lib) / "gateway" / "control" / "migrations"
        for sql in sorted((ROOT / "migrations").rglob("*.sql")):  # with the postgresql/ twins
            rel = sql.relative_to(ROOT / "migrations")
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sql, target / rel)


setup(cmdclass={"build_py": BuildWithMigrations})
