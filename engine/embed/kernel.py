"""The local model's int8 kernel, built at load time from the shipped file (no download).

The shipped ``model.onnx`` stores every projection's weights as int8 with one float scale per
output column, dequantized in the graph (``Cast`` → ``Mul`` → ``MatMul``). ONNX Runtime folds that
into float32 weights when it loads the model, so every forward pass is a float32 network. This
module rewrites each such triple into one ``com.microsoft.DynamicQuantizeMatMul`` node over the
*same* weights and scales: the activations are quantized to uint8 per tensor at run time and the
product is computed in integer arithmetic (less CPU per query on an AVX2 machine;
docs/perf-journal/2026-12-01-hybrid-path.md, third pass). The weights are stored shifted by 128
as uint8 (zero point 128): int8 weights × uint8 activations would saturate AVX2's 16-bit sums
(one output of 4.8 came out 0.9 off). The vectors change slightly (cosine ≥ 0.97 to the float
network's), so the embedder reports another model id and indexes re-embed.

The file is edited at the protobuf wire level (the few ONNX fields the rewrite reads, every other
byte copied): deterministic, and no ``onnx`` package at run time (importing it cost ≈ 1.3 s of CPU,
most of it ``ml_dtypes``). ONNX Runtime checks the result when it loads it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from engine.embed.errors import ProviderNotAvailable

#: The number of projections rewritten in all-MiniLM-L6-v2 (6 layers × Q, K, V, out, up, down).
EXPECTED_PROJECTIONS: Final = 36
FLOAT, UINT8, INT8 = 1, 2, 3  # TensorProto.DataType
# Field numbers (onnx.proto): ModelProto.graph / opset_import; GraphProto.node / initializer;
# NodeProto.input / output / name / op_type / domain; TensorProto.dims / data_type / name / raw_data.
MODEL_GRAPH, MODEL_OPSET = 7, 8
GRAPH_NODE, GRAPH_INIT = 1, 5
NODE_IN, NODE_OUT, NODE_NAME, NODE_OP, NODE_DOMAIN = 1, 2, 3, 4, 7
TENSOR_DIMS, TENSOR_TYPE, TENSOR_NAME, TENSOR_RAW = 1, 2, 8, 9
MS_DOMAIN: Final = "com.microsoft"
_SHIFT: Final = bytes((b + 128) & 0xFF for b in range(256))


class KernelError(ProviderNotAvailable):
    """The model file is not the protobuf this rewrite reads."""


Field = tuple[int, int, int | memoryview, memoryview]  # number, wire type, value, the field's own bytes


def varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise KernelError("the model file is not a valid protobuf (a varint runs off)")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes | memoryview) -> list[Field]:
    """The top-level fields of one protobuf message, in order (views into ``data``: no copies)."""
    buf = memoryview(data)
    out: list[Field] = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + width], pos + width
        elif wire == 2:
            length, pos = varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        else:
            raise KernelError(f"the model file is not a valid protobuf (wire type {wire})")
        if pos > len(buf):
            raise KernelError("the model file is not a valid protobuf (a field runs off)")
        out.append((number, wire, value, buf[start:pos]))
    return out


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def bytes_field(number: int, payload: bytes | memoryview) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + bytes(payload)


def int_field(number: int, value: int) -> bytes:
    return encode_varint(number << 3) + encode_varint(value)


def _strings(parsed: list[Field], number: int) -> list[str]:
    return [bytes(v).decode() for n, w, v, _ in parsed if n == number and isinstance(v, memoryview)]


def last_string(parsed: list[Field], number: int) -> str:
    found = _strings(parsed, number)
    return found[-1] if found else ""


@dataclass(frozen=True)
class Node:
    op: str
    domain: str
    inputs: list[str]
    outputs: list[str]

    @staticmethod
    def parse(buf: memoryview) -> Node:
        parsed = fields(buf)
        op, domain = last_string(parsed, NODE_OP), last_string(parsed, NODE_DOMAIN)
        return Node(op, domain, _strings(parsed, NODE_IN), _strings(parsed, NODE_OUT))


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: int
    dims: list[int]
    raw: memoryview | None

    @staticmethod
    def parse(buf: memoryview) -> Tensor:
        dims: list[int] = []
        dtype, name, raw = 0, "", None
        for number, _wire, value, _ in fields(buf):
            if number == TENSOR_DIMS and isinstance(value, int):
                dims.append(value)
            elif number == TENSOR_DIMS and isinstance(value, memoryview):  # packed
                pos = 0
                while pos < len(value):
                    dim, pos = varint(value, pos)
                    dims.append(dim)
            elif number == TENSOR_TYPE and isinstance(value, int):
                dtype = value
            elif number == TENSOR_NAME and isinstance(value, memoryview):
                name = bytes(value).decode()
            elif number == TENSOR_RAW and isinstance(value, memoryview):
                raw = value
        return Tensor(name, dtype, dims, raw)


def _tensor(name: str, dtype: int, dims: list[int], raw: bytes) -> bytes:
    body = b"".join(int_field(TENSOR_DIMS, d) for d in dims)
    body += int_field(TENSOR_TYPE, dtype) + bytes_field(TENSOR_NAME, name.encode())
    return body + bytes_field(TENSOR_RAW, raw)


def _node(op: str, inputs: list[str], output: str, name: str) -> bytes:
    body = b"".join(bytes_field(NODE_IN, i.encode()) for i in inputs)
    body += bytes_field(NODE_OUT, output.encode()) + bytes_field(NODE_NAME, name.encode())
    return body + bytes_field(NODE_OP, op.encode()) + bytes_field(NODE_DOMAIN, MS_DOMAIN.encode())


def _single(readers: dict[str, list[int]], name: str) -> int | None:
    found = readers.get(name, [])
    return found[0] if len(found) == 1 else None


def int8_matmul_model(model: bytes) -> tuple[bytes, int]:
    """``model`` with every int8-weight ``MatMul`` computed in int8; returns (bytes, how many).

    A triple is rewritten only when the ``Cast`` reads an int8 matrix initializer (raw data) that
    nothing else reads, the ``Mul`` scales it by an initializer of one float per output column,
    and the product's only reader is a ``MatMul`` that takes it as its right operand; anything else
    (the embedding tables' gathers) is left as it is.
    """
    top = fields(model)
    graphs = [v for n, w, v, _ in top if n == MODEL_GRAPH and isinstance(v, memoryview)]
    if len(graphs) != 1:
        raise KernelError("the model file has no graph")
    graph = fields(graphs[0])
    nodes = [Node.parse(v) for n, w, v, _ in graph if n == GRAPH_NODE and isinstance(v, memoryview)]
    tensors = (Tensor.parse(v) for n, w, v, _ in graph if n == GRAPH_INIT and isinstance(v, memoryview))
    inits = {t.name: t for t in tensors}
    readers: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        for name in node.inputs:
            readers[name].append(i)
    fused: dict[int, bytes] = {}  # the MatMul's index → the node that replaces it
    gone: set[int] = set()
    dropped: set[str] = set()
    added: list[bytes] = []
    for i, cast in enumerate(nodes):
        weight = inits.get(cast.inputs[0]) if cast.op == "Cast" and cast.inputs and not cast.domain else None
        if weight is None or weight.dtype != INT8 or len(weight.dims) != 2 or weight.raw is None:
            continue
        rows, columns = weight.dims
        m = _single(readers, cast.outputs[0])
        if m is None or readers[cast.inputs[0]] != [i] or len(weight.raw) != rows * columns:
            continue
        mul = nodes[m]
        scale = inits.get(mul.inputs[1]) if mul.op == "Mul" and len(mul.inputs) == 2 else None
        if scale is None or mul.inputs[0] != cast.outputs[0] or readers[mul.inputs[1]] != [m]:
            continue
        if scale.dtype != FLOAT or scale.raw is None or len(scale.raw) != 4 * columns:
            continue
        if scale.dims[-1:] != [columns]:
            continue
        u = _single(readers, mul.outputs[0])
        if u is None or nodes[u].op != "MatMul" or nodes[u].domain or nodes[u].inputs[1] != mul.outputs[0]:
            continue
        out = nodes[u].outputs[0]
        shifted = bytes(weight.raw).translate(_SHIFT)  # int8 (two's complement) → uint8, zero point 128
        added += [
            _tensor(f"{out}__weight", UINT8, [rows, columns], shifted),
            _tensor(f"{out}__scale", FLOAT, [columns], bytes(scale.raw)),
            _tensor(f"{out}__zero", UINT8, [columns], bytes([128]) * columns),
        ]
        inputs = [nodes[u].inputs[0], f"{out}__weight", f"{out}__scale", f"{out}__zero"]
        fused[u] = _node("DynamicQuantizeMatMul", inputs, out, f"{out}__int8")
        gone |= {i, m}
        dropped |= {cast.inputs[0], mul.inputs[1]}
    body = bytearray()
    index = 0
    for number, _wire, value, raw in graph:
        if number == GRAPH_NODE:
            if index in fused:
                body += bytes_field(GRAPH_NODE, fused[index])
            elif index not in gone:
                body += raw
            index += 1
        elif number == GRAPH_INIT and isinstance(value, memoryview) and Tensor.parse(value).name in dropped:
            continue
        else:
            body += raw
    for tensor in added:
        body += bytes_field(GRAPH_INIT, tensor)
    out_model = bytearray()
    for number, _, _, raw in top:
        if number == MODEL_GRAPH:
            out_model += encode_varint(MODEL_GRAPH << 3 | 2) + encode_varint(len(body))
            out_model += body
        else:
            out_model += raw
    opsets = [fields(v) for n, w, v, _ in top if n == MODEL_OPSET and isinstance(v, memoryview)]
    if fused and not any(last_string(o, 1) == MS_DOMAIN for o in opsets):
        out_model += bytes_field(MODEL_OPSET, bytes_field(1, MS_DOMAIN.encode()) + int_field(2, 1))
    return bytes(out_model), len(fused)
