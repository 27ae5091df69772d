"""YAML in and out, the same way everywhere (libyaml when present)."""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def dump(data: dict[str, Any]) -> str:
    out: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000, default_flow_style=False
    )
    return out
