"""The one error tree and its one JSON envelope."""

from __future__ import annotations

import inspect
import json

import pytest

import gateway.errors as errors
from gateway.errors import (
    EngineCapacity,
    EngineStartFailed,
    GatewayError,
    MethodNotAllowed,
    RateLimited,
    Unauthorized,
    WorkspaceUnavailable,
    render,
)


def _classes() -> list[type[GatewayError]]:
    return [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, GatewayError) and not c.__name__.startswith("_")
    ]


@pytest.mark.req("gw:ops")
def test_every_error_is_drawn_in_the_tree_with_its_code_and_status() -> None:
    doc = errors.__doc__ or ""
    for cls in _classes():
        line = next((ln for ln in doc.splitlines() if f" {cls.__name__} " in ln + " "), None)
        assert line is not None, f"{cls.__name__} missing from the tree in gateway/errors.py"
        assert str(cls.status) in line and cls.code in line, line


def test_codes_are_unique() -> None:
    codes = [c.code for c in _classes()]
    assert len(codes) == len(set(codes))


@pytest.mark.req("gw:503")
def test_503_envelope_carries_retry_after_in_whole_seconds() -> None:
    status, headers, body = render(EngineStartFailed("the engine could not start", retry_after=2.2))
    assert status == 503
    assert headers["Retry-After"] == "3"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {
        "error": {"code": "engine_start_failed", "message": "the engine could not start"}
    }
    assert isinstance(EngineCapacity("x", retry_after=0), WorkspaceUnavailable)
    assert render(EngineCapacity("x", retry_after=0))[1]["Retry-After"] == "1"


@pytest.mark.req("gw:route")
def test_401_429_405_headers() -> None:
    _, headers, _ = render(
        Unauthorized("no", resource_metadata="http://h/.well-known/x", error="invalid_token")
    )
    assert (
        headers["WWW-Authenticate"]
        == 'Bearer error="invalid_token", resource_metadata="http://h/.well-known/x"'
    )
    assert render(RateLimited("slow", retry_after=0.2))[1]["Retry-After"] == "1"
    assert render(MethodNotAllowed("no", allow=("POST", "GET")))[1]["Allow"] == "POST, GET"
