"""The int8 kernel built at load from the shipped model: what it rewrites, and how far its vectors
stay from the float32 network's (the vectors this project used before it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.embed.kernel import EXPECTED_PROJECTIONS, KernelError, int8_matmul_model
from engine.embed.local import LocalEmbedder, default_model_path
from engine.embed.passes import (
    EXPECTED_KEY_TRANSPOSES,
    EXPECTED_MASKS,
    direct_key_transpose,
    single_pass_model,
)
from engine.index.indexer import Indexer
from tests.engine.index.helpers import CALLER, engine

#: The least cosine between a text's int8-kernel vector and its float32-network vector on the
#: texts below (measured on the bench: 0.979 over 256 LoCoMo turns, 0.988 over 200 questions).
MIN_COSINE = 0.97
OLD_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"  # the float32 network's vectors, before the kernel

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "Caroline: I went to an LGBTQ support group yesterday and it was so powerful.",
    "On 8 May 2023, Melanie said that she painted a sunrise over the lake last year.",
    "Production uses PostgreSQL 17 as its database; the replica lives in Frankfurt.",
    "What does Jon do to relax after work?",
    "ok",
    "The quarterly budget review moved to Thursday because the CFO is travelling. " * 6,
    "Zürich office 🚀 naïve café",
]


def _session(model: bytes | str) -> Any:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _tiny(scale_shape: list[int]) -> bytes:
    """x[1, 3, 8] @ (int8 W[8, 4] × scale): the shipped model's pattern, in miniature."""
    rng = np.random.default_rng(7)
    weight = rng.integers(-127, 128, size=(8, 4)).astype(np.int8)
    scale = (rng.random(scale_shape) * 0.02 + 0.01).astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])],
        [numpy_helper.from_array(weight, "w_q"), numpy_helper.from_array(scale, "w_scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    serialized: bytes = model.SerializeToString()
    return serialized


def test_the_pattern_becomes_one_int8_node_and_gives_nearly_the_same_product() -> None:
    source = _tiny([1, 4])
    rewritten, count = int8_matmul_model(source)
    assert count == 1
    ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
    assert ops == ["DynamicQuantizeMatMul"]
    x = np.random.default_rng(1).standard_normal((1, 3, 8)).astype(np.float32)
    exact = _session(source).run(None, {"x": x})[0]
    fast = _session(rewritten).run(None, {"x": x})[0]
    assert fast.shape == exact.shape
    assert np.abs(fast - exact).max() < 0.02 * np.abs(exact).max()
    assert int8_matmul_model(source)[0] == rewritten  # deterministic


def test_a_scale_that_is_not_per_output_column_is_left_alone() -> None:
    source = _tiny([8, 1])  # one scale per input row (as the embedding tables have): not this kernel's
    rewritten, count = int8_matmul_model(source)
    assert count == 0
    assert [n.op_type for n in onnx.load_from_string(rewritten).graph.node] == ["Cast", "Mul", "MatMul"]


@pytest.fixture(scope="module")
def shipped() -> bytes:
    return default_model_path().read_bytes()


def test_the_shipped_model_has_every_projection_rewritten(shipped: bytes) -> None:
    rewritten, count = int8_matmul_model(shipped)
    assert count == EXPECTED_PROJECTIONS == 36
    ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
    assert ops.count("DynamicQuantizeMatMul") == 36
    assert ops.count("MatMul") == 12  # attention's own products (scores, weighted values) stay float
    assert ops.count("Cast") == 3  # the two embedding tables' and the mask's stay


def test_the_single_pass_model_drops_the_mask_and_keeps_the_vectors_bit_for_bit(shipped: bytes) -> None:
    kernel, _ = int8_matmul_model(shipped)
    single, layers = single_pass_model(kernel)
    assert layers == EXPECTED_MASKS == 6
    before = onnx.load_from_string(kernel).graph
    after = onnx.load_from_string(single).graph
    ops = [n.op_type for n in after.node]
    assert "IsNaN" not in ops and "GatherND" not in ops and ops.count("Where") == 0
    assert ops.count("Softmax") == 6 and ops.count("DynamicQuantizeMatMul") == 36
    assert len(after.node) == len(before.node) - 40
    produced = {o: n.op_type for n in after.node for o in n.output}
    assert all(produced[n.input[0]] == "MatMul" for n in after.node if n.op_type == "Softmax")
    _assert_same_outputs(kernel, single)
    assert single_pass_model(single) == (single, 0)  # nothing left to drop: the same bytes


def _assert_same_outputs(before: bytes, after: bytes) -> None:
    """Both models give the same hidden states, bit for bit, one text per pass with a mask of
    ones (what the embedder runs)."""
    one, two = _session(before), _session(after)
    tokenizer = LocalEmbedder().model()._tokenizer
    for text in TEXTS:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        want = one.run(["last_hidden_state"], feeds)[0]
        assert np.array_equal(two.run(["last_hidden_state"], feeds)[0], want)


def test_each_key_transpose_is_one_node_and_the_vectors_stay_bit_for_bit(shipped: bytes) -> None:
    single, _ = single_pass_model(int8_matmul_model(shipped)[0])
    direct, count = direct_key_transpose(single)
    assert count == EXPECTED_KEY_TRANSPOSES == 6
    before, after = onnx.load_from_string(single).graph, onnx.load_from_string(direct).graph
    assert len(after.node) == len(before.node) - 54  # ten nodes per layer become one
    ops = [n.op_type for n in after.node]
    # what is left computes the embeddings' positions and the two view shapes all layers share
    assert (ops.count("Shape"), ops.count("Slice"), ops.count("Concat")) == (2, 1, 2)
    perms = [list(n.attribute[0].ints) for n in after.node if n.op_type == "Transpose"]
    assert perms.count([0, 2, 3, 1]) == 6 and len(perms) == 24  # Q, V, the output and the keys
    _assert_same_outputs(single, direct)
    assert direct_key_transpose(direct) == (direct, 0)


def _float_network(shipped: bytes, texts: list[str]) -> Iterator[np.ndarray]:
    """The vectors as the engine computed them before the kernel: the shipped file as it is."""
    session = _session(shipped)
    tokenizer = LocalEmbedder().model()._tokenizer
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        row = session.run(["last_hidden_state"], feeds)[0][0].mean(axis=0)
        yield row / np.linalg.norm(row)


@pytest.mark.req("embed:local")
def test_the_kernel_vectors_stay_close_to_the_float_network(shipped: bytes) -> None:
    reference = np.stack(list(_float_network(shipped, TEXTS)))
    vectors = LocalEmbedder().embed_documents(TEXTS)
    cosines = (reference * vectors).sum(axis=1)
    assert cosines.min() >= MIN_COSINE, cosines
    assert not np.allclose(cosines, 1.0, atol=1e-6)  # it is another kernel: hence another model id
    # what a search sees: the same nearest text for each of the two questions
    for question in (0, 4):
        assert np.argmax(reference[1:] @ reference[question]) == np.argmax(vectors[1:] @ vectors[question])


class _OldModel(LocalEmbedder):
    """Vectors stored under the float32 network's model id (an index built before the kernel)."""

    @property
    def model_id(self) -> str:
        return OLD_MODEL_ID


def _stored(indexer: Indexer) -> tuple[str | None, int]:
    db = indexer.db.db
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    vectors = db.execute("SELECT count(*) FROM vec_chunks").fetchall()[0][0]
    return meta.get("model_id"), int(vectors)


@pytest.mark.req("embed:model-id")
def test_an_index_of_the_float_network_is_re_embedded(tmp_path: Path) -> None:
    new = LocalEmbedder()
    assert new.model_id != OLD_MODEL_ID
    with engine(tmp_path, _OldModel()) as e:
        e.memory.remember(CALLER, "Caroline: I went to an LGBTQ support group yesterday.")
        e.memory.remember(CALLER, "Melanie: I painted a sunrise over the lake last year.")
        e.settle()
        assert _stored(e.indexer) == (OLD_MODEL_ID, 2)
    with engine(tmp_path, new) as e:  # the engine now embeds with the kernel
        e.settle()
        assert _stored(e.indexer) == (new.model_id, 2)
        assert e.indexer.backlog() == 0
        cache = e.indexer.cache
        assert cache is not None and cache.count(new.model_id) >= 2 and cache.count(OLD_MODEL_ID) >= 2
        reply = e.recall.get_context(CALLER, "when did Caroline go to the support group?")
        assert reply["retrieval"] == "hybrid" and "support group" in reply["notes"][0]["text"]


def test_a_file_that_is_not_a_model_is_a_clear_error(shipped: bytes) -> None:
    for broken in (shipped[:1000], b"\xff" * 12, b"\x0f", b""):
        with pytest.raises(KernelError, match=r"protobuf|no graph"):
            int8_matmul_model(broken)
