"""The requirements manifest holds in both directions (see ``tests/req_manifest.py``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.req_manifest import REQUIREMENTS

TESTS = Path(__file__).parent
SPEC = TESTS.parent.parent / "shared" / "SPEC.md"


def _cited_ids() -> dict[str, list[str]]:
    """Every ID named in a ``pytest.mark.req(...)`` call in the test tree, with where."""
    cited: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "req"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "mark"
            ):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        cited.setdefault(arg.value, []).append(f"{path.name}:{node.lineno}")
    return cited


def test_every_requirement_in_force_has_a_test() -> None:
    cited = _cited_ids()
    missing = [rid for rid, deferred in REQUIREMENTS.items() if deferred is None and rid not in cited]
    assert not missing, f"requirement IDs in force with no test citing them: {missing}"


def test_every_cited_id_is_known() -> None:
    unknown = {rid: where for rid, where in _cited_ids().items() if rid not in REQUIREMENTS}
    assert not unknown, f"tests cite IDs that are not in tests/req_manifest.py: {unknown}"


def test_manifest_matches_the_spec_when_it_is_present() -> None:
    if not SPEC.exists():  # the spec lives beside the repository, not in it
        return
    text = SPEC.read_text(encoding="utf-8")
    spec_ids = set(re.findall(r"`([a-z]+:[a-z][a-z:-]*)`", text)) - {"project:fjord"}
    assert spec_ids - set(REQUIREMENTS) == set(), "IDs in the spec missing from the manifest"
