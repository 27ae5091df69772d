"""The provider factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.embed import UnknownProvider, make_embedder
from engine.embed.local import LocalEmbedder
from engine.embed.off import OffEmbedder
from engine.embed.remote import RemoteEmbedder
from engine.embed.vertex import VertexEmbedder


@pytest.mark.req("embed:off")
def test_factory_builds_each_provider_without_calling_it(tmp_path: Path) -> None:
    local = make_embedder("local", threads=1, batch_size=8)
    assert isinstance(local, LocalEmbedder) and (local.threads, local.batch_size) == (1, 8)
    vertex = make_embedder("vertex", project="p", batch_size=5)
    assert isinstance(vertex, VertexEmbedder) and vertex.config.batch_size == 5
    assert vertex.config.project == "p" and vertex.dim == 768
    remote = make_embedder("remote", socket_path=tmp_path / "e.sock", timeout_s=3)
    assert isinstance(remote, RemoteEmbedder)
    remote.close()
    assert isinstance(make_embedder("off"), OffEmbedder)


def test_factory_refuses_unknown_providers_and_options() -> None:
    with pytest.raises(UnknownProvider, match="local, remote, vertex, off"):
        make_embedder("openai")
    with pytest.raises(TypeError):
        make_embedder("off", threads=2)
