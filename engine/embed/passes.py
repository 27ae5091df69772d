"""Graph passes after the int8 rewrite that change no number: fewer ONNX Runtime nodes per query.

A query is ≈ 12 tokens, so the model's ≈ 270 small nodes cost about as much as their arithmetic
(docs/perf-journal/2026-12-01-hybrid-path.md, fifth pass).
Each pass here removes nodes whose result the engine's passes do not need, or computes the same
tensor with fewer nodes — the vectors stay the same bit for bit (tested), so the model id stays.
Edited at the protobuf wire level, as :mod:`engine.embed.kernel` does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Final

from engine.embed.kernel import (
    GRAPH_NODE,
    MODEL_GRAPH,
    NODE_IN,
    NODE_NAME,
    NODE_OP,
    NODE_OUT,
    KernelError,
    Node,
    bytes_field,
    encode_varint,
    fields,
    int_field,
    last_string,
    varint,
)

#: Attention layers whose mask :func:`single_pass_model` drops (one per transformer layer).
EXPECTED_MASKS: Final = 6
#: Key transposes :func:`direct_key_transpose` makes one node (one per transformer layer).
EXPECTED_KEY_TRANSPOSES: Final = 6
GRAPH_OUTPUT, VALUE_NAME = 12, 1  # GraphProto.output; ValueInfoProto.name
NODE_ATTRIBUTE = 5  # NodeProto.attribute
ATTR_NAME, ATTR_INTS, ATTR_TYPE, INTS = 1, 8, 20, 7  # AttributeProto fields; AttributeType.INTS

#: A pass reads the graph's nodes and says which node outputs to read from another tensor
#: (``rename``) and which nodes to replace by new ones (index → node bytes); nodes that nothing
#: reads afterwards are dropped.
Edit = tuple[dict[str, str], dict[int, bytes]]


def _renamed(buf: bytes, rename: dict[str, str]) -> bytes:
    """A node with its inputs renamed (every other field copied as it is)."""
    out = bytearray()
    for number, _wire, value, raw in fields(buf):
        name = bytes(value).decode() if number == NODE_IN and isinstance(value, memoryview) else None
        out += bytes_field(NODE_IN, rename[name].encode()) if name in rename else raw
    return bytes(out)


def _ints(buf: bytes | memoryview, name: str) -> list[int] | None:
    """A node's ``ints`` attribute ``name`` (a perm), or None."""
    for number, _wire, value, _ in fields(buf):
        if number != NODE_ATTRIBUTE or not isinstance(value, memoryview):
            continue
        parsed = fields(value)
        if last_string(parsed, ATTR_NAME) != name:
            continue
        found: list[int] = []
        for n, _w, v, _ in parsed:
            if n == ATTR_INTS and isinstance(v, int):
                found.append(v)
            elif n == ATTR_INTS and isinstance(v, memoryview):  # packed
                found += [int(x) for x in _unpacked(v)]
        return found
    return None


def _unpacked(buf: memoryview) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        value, pos = varint(buf, pos)
        out.append(value)
    return out


def _transpose(source: str, output: str, perm: list[int]) -> bytes:
    attribute = bytes_field(ATTR_NAME, b"perm") + b"".join(int_field(ATTR_INTS, p) for p in perm)
    attribute += int_field(ATTR_TYPE, INTS)
    body = bytes_field(NODE_IN, source.encode()) + bytes_field(NODE_OUT, output.encode())
    body += bytes_field(NODE_NAME, f"{output}__direct".encode()) + bytes_field(NODE_OP, b"Transpose")
    return body + bytes_field(NODE_ATTRIBUTE, attribute)


def _edit(model: bytes, plan: Callable[[list[Node], list[memoryview]], Edit]) -> bytes:
    """``model`` with ``plan``'s renames and replacements applied and dead nodes dropped."""
    top = fields(model)
    graphs = [v for n, w, v, _ in top if n == MODEL_GRAPH and isinstance(v, memoryview)]
    if len(graphs) != 1:
        raise KernelError("the model file has no graph")
    graph = fields(graphs[0])
    raw = [v for n, w, v, _ in graph if n == GRAPH_NODE and isinstance(v, memoryview)]
    nodes = [Node.parse(v) for v in raw]
    rename, replace = plan(nodes, raw)
    kept: list[bytes] = []
    for i, (buf, node) in enumerate(zip(raw, nodes, strict=True)):
        new = replace.get(i, bytes(buf))
        kept.append(_renamed(new, rename) if any(name in rename for name in node.inputs) else new)
    parsed = [Node.parse(memoryview(b)) for b in kept]
    outputs = {
        last_string(fields(v), VALUE_NAME)
        for n, w, v, _ in graph
        if n == GRAPH_OUTPUT and isinstance(v, memoryview)
    }
    alive = [True] * len(parsed)
    changed = True
    while changed:  # drop the nodes nothing reads any more, until none is left
        needed = outputs | {name for k, node in enumerate(parsed) if alive[k] for name in node.inputs}
        changed = False
        for k, node in enumerate(parsed):
            if alive[k] and not any(o in needed for o in node.outputs):
                alive[k], changed = False, True
    body = bytearray()
    index = 0
    for number, _wire, _value, field in graph:
        if number == GRAPH_NODE:
            if alive[index]:
                body += bytes_field(GRAPH_NODE, kept[index])
            index += 1
        else:
            body += field
    out = bytearray()
    for number, _, _, field in top:
        if number == MODEL_GRAPH:
            out += encode_varint(MODEL_GRAPH << 3 | 2) + encode_varint(len(body)) + body
        else:
            out += field
    return bytes(out)


def _producers(nodes: list[Node]) -> tuple[dict[str, int], dict[str, list[int]]]:
    producer = {out: i for i, node in enumerate(nodes) for out in node.outputs}
    readers: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        for name in node.inputs:
            readers[name].append(i)
    return producer, readers


def single_pass_model(model: bytes) -> tuple[bytes, int]:
    """``model`` without its attention mask; returns (bytes, how many attention layers).

    The engine runs one text per pass, unpadded, with an attention mask of ones: each layer then
    adds a mask of zeros to its scores (``Add`` of a ``Where`` of the mask) and replaces NaNs that a
    softmax of finite scores cannot produce (``IsNaN`` → ``Where``). Both are bypassed and the nodes
    that only fed them (40 of the graph's 313) are dropped: the same vectors bit for bit (x + 0 is
    x, and -0 and +0 give the same softmax). The model then ignores ``attention_mask``: a padded
    batch would attend to its padding (the embedder never pads)."""
    layers = 0

    def plan(nodes: list[Node], raw: list[memoryview]) -> Edit:
        nonlocal layers
        producer, readers = _producers(nodes)
        rename: dict[str, str] = {}
        for s, softmax in enumerate(nodes):
            if softmax.op != "Softmax" or softmax.domain or len(softmax.inputs) != 1:
                continue
            add = nodes[producer[softmax.inputs[0]]] if softmax.inputs[0] in producer else None
            if add is None or add.op != "Add" or len(add.inputs) != 2 or readers[add.outputs[0]] != [s]:
                continue
            mask = nodes[producer[add.inputs[1]]] if add.inputs[1] in producer else None
            if mask is None or mask.op != "Where":
                continue
            after = [nodes[r] for r in readers[softmax.outputs[0]]]
            isnan = [n for n in after if n.op == "IsNaN" and not n.domain]
            where = [n for n in after if n.op == "Where" and not n.domain]
            if len(after) != 2 or len(isnan) != 1 or len(where) != 1:
                continue
            if where[0].inputs[0] != isnan[0].outputs[0] or where[0].inputs[2] != softmax.outputs[0]:
                continue
            rename[add.outputs[0]] = add.inputs[0]
            rename[where[0].outputs[0]] = softmax.outputs[0]
            layers += 1
        return rename, {}

    return _edit(model, plan), layers


def direct_key_transpose(model: bytes) -> tuple[bytes, int]:
    """``model`` with each key matrix transposed for the score product by one node; returns
    (bytes, how many).

    The export turns the keys ``[batch, heads, tokens, dim]`` into ``[batch, heads, dim, tokens]``
    through ``Reshape`` to three axes → ``Transpose`` → ``Reshape`` back, with the shapes computed
    at run time (``Shape``, three ``Slice``, two ``Concat``): ten nodes per layer where one
    ``Transpose`` (perm 0, 2, 3, 1 of the keys before their head transpose) gives the same tensor
    — the same numbers moved, so the same vectors bit for bit."""
    count = 0

    def plan(nodes: list[Node], raw: list[memoryview]) -> Edit:
        nonlocal count
        producer, _ = _producers(nodes)

        def made_by(name: str, op: str) -> int | None:
            i = producer.get(name)
            return i if i is not None and nodes[i].op == op and not nodes[i].domain else None

        replace: dict[int, bytes] = {}
        for i, node in enumerate(nodes):
            if node.op != "Reshape" or node.domain or not node.inputs:
                continue
            swap = made_by(node.inputs[0], "Transpose")
            flat = made_by(nodes[swap].inputs[0], "Reshape") if swap is not None else None
            heads = made_by(nodes[flat].inputs[0], "Transpose") if flat is not None else None
            if swap is None or heads is None:
                continue
            if _ints(raw[swap], "perm") != [0, 2, 1] or _ints(raw[heads], "perm") != [0, 2, 1, 3]:
                continue
            replace[i] = _transpose(nodes[heads].inputs[0], node.outputs[0], [0, 2, 3, 1])
            count += 1
        return {}, replace

    return _edit(model, plan), count
