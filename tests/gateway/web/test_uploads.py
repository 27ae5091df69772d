"""Uploads for an import (gateway/web/uploads.py): the byte limit, and picked files as a zip."""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from gateway.errors import PayloadTooLarge
from gateway.web.uploads import bundle, capped, relative_names


def test_a_folder_picked_whole_loses_only_its_own_name() -> None:
    assert relative_names(["vault/a.md", "vault/sub/b.md"]) == ["a.md", "sub/b.md"]
    assert relative_names(["a.md", "b.md"]) == ["a.md", "b.md"]
    assert relative_names(["vault/a.md", "other/b.md"]) == ["vault/a.md", "other/b.md"]
    assert relative_names(["vault/a.md", "vault"]) == ["vault/a.md", "vault"]


def test_picked_files_are_zipped_with_their_names_as_given() -> None:
    data = bundle([("v/Notes/a.md", b"A"), ("v/../../escape.md", b"E")])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert {i.filename: archive.read(i) for i in archive.infolist()} == {
            "Notes/a.md": b"A",
            "../../escape.md": b"E",  # kept: the engine refuses it and says why
        }


@pytest.mark.anyio
async def test_the_limit_holds_with_and_without_a_declared_length() -> None:
    async def echo(request: Request) -> Response:
        try:
            body = b""
            async for chunk in capped(request, 1000).stream():
                body += chunk
        except PayloadTooLarge as exc:
            return PlainTextResponse(exc.message, status_code=413)
        return PlainTextResponse(str(len(body)))

    app = Starlette(routes=[Route("/", echo, methods=["POST"])])

    async def chunked(n: int) -> AsyncIterator[bytes]:
        for _ in range(n):
            yield b"x" * 300

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        assert (await client.post("/", content=b"x" * 1000)).text == "1000"
        declared = await client.post("/", content=b"x" * 1001)
        assert declared.status_code == 413 and "(1,000 bytes)" in declared.text
        assert (await client.post("/", content=chunked(3))).text == "900"
        streamed = await client.post("/", content=chunked(4))
        assert streamed.status_code == 413 and "Nothing was imported" in streamed.text
