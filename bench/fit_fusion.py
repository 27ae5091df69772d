"""Fit the learned fusion weights (``bench/fusion_weights.json``) on LoCoMo's dev half A.

    python -m bench.fit_fusion dump --layout speaker,plain --keep DIR --cache FILE --out DIR
    python -m bench.fit_fusion fit DIR/*.npz [--write bench/fusion_weights.json]
    python -m bench.fit_fusion eval DIR/*.npz [--weights FILE]

``dump`` builds (or, with ``--keep``, reopens) each conversation's workspace as ``bench.locomo``
does, and for every question keeps its candidates as the ranking gathers them
(:func:`engine.recall.search.gather`) with their :class:`engine.recall.fusion.Signals`, their
keyword coverage and how many of the question's evidence turns each holds — numbers only, never
the texts, and never inside the project. ``fit`` fits a pairwise logistic model (each evidence
memory against each other memory among the question's first ``--window`` by the hand-set score,
every question weighing the same, L2-regularised, Newton's method in numpy) on half A
(conv-26/44/47) only and scales it so that the keyword signal weighs 1. ``eval`` re-ranks the
dumped candidates as ``Recall.search`` does (fused score, one hit per memory, the first 20
re-sorted with keyword coverage) and prints R@10 per half for the hand-set and the learned scores:
a quick look; the figures that count come from ``python -m bench.locomo --fusion learned``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench import locomo
from bench.learned import load_learned
from bench.paths import locomo_path
from engine.recall.context import Recall, RecallSettings
from engine.recall.freshness import LEXICAL_WEIGHT
from engine.recall.fusion import Learned, Signals, Weights, signals
from engine.recall.lexical import lexical_score
from engine.recall.query import parse_query
from engine.recall.search import gather
from engine.scope import shown

Array = np.ndarray[Any, Any]
FEATURES = Signals._fields
#: The signals fitted by default: the hand-set score's four terms and the keyword × meaning
#: product. The others are dumped for study (they did not help: docs/recall.md).
FITTED = ("keyword", "meaning", "person", "session", "agreement")
HAND = Weights()
OBJECTIVES = {
    "softmax": "listwise: the mean log-softmax of each question's evidence memories over all its "
    "candidates (one chunk per memory); every question weighs the same; L2 {l2}",
    "pairwise": "pairwise logistic: each evidence memory over each other memory in the first "
    "{window} by the hand-set score; every question weighs the same; L2 {l2}",
}


@dataclass(frozen=True)
class Dump:
    """Every candidate of every question of one layout: row-aligned arrays."""

    layout: str
    question: Array  # the question's index (into ``half``, ``category``, ``evidence``)
    x: Array  # Signals, one row per candidate
    nudge: Array  # the importance nudge fusion adds
    lexical: Array  # keyword coverage (freshness adds LEXICAL_WEIGHT × it to the first 20)
    order: Array  # the tie-break: newer first, then the lower key (0 = first)
    memory: Array  # the memory, numbered per question
    hits: Array  # how many of the question's evidence turns the memory holds
    half: Array  # per question: True for half A
    category: Array  # per question
    evidence: Array  # per question: how many evidence turns

    def save(self, path: Path) -> None:
        np.savez_compressed(path, layout=np.array(self.layout), **{k: getattr(self, k) for k in _ARRAYS})

    @staticmethod
    def load(path: Path) -> Dump:
        with np.load(path) as data:
            return Dump(str(data["layout"]), *(data[k] for k in _ARRAYS))


_ARRAYS = ("question", "x", "nudge", "lexical", "order", "memory", "hits", "half", "category", "evidence")


def dump(built: Sequence[locomo.Built], layout: str, settings: RecallSettings) -> Dump:
    qvecs = locomo.query_vectors(list(built), settings)
    cols: dict[str, list[Any]] = {k: [] for k in _ARRAYS}
    qi = 0
    for i, b in enumerate(built):
        recall = Recall(b.indexer, settings)
        for q in b.conv.questions:
            query = parse_query(q.text)
            found = gather(
                recall.db,
                query,
                qvecs.get((i, q.text)),
                lambda state, scope: shown(state, scope, None, False),
                depth=settings.depth,
                weights=settings.weights,
                budget=settings.keyword_budget,
            )
            cands = found.candidates
            ties = sorted(
                range(len(cands)), key=lambda j: (cands[j].created or "", -cands[j].key), reverse=True
            )
            order = {j: n for n, j in enumerate(ties)}
            numbers: dict[str, int] = {}
            wanted = set(q.evidence)
            for j, (c, s) in enumerate(zip(cands, signals(cands, found.groups), strict=True)):
                row = found.rows[c.key]
                cols["question"].append(qi)
                cols["x"].append(tuple(s))
                imp = c.importance
                cols["nudge"].append(0.0 if imp is None else settings.weights.nudge * (imp - 0.5) * 2)
                cols["lexical"].append(lexical_score(query.terms, row.text, row.tags.split("\n")))
                cols["order"].append(order[j])
                cols["memory"].append(numbers.setdefault(c.memory, len(numbers)))
                cols["hits"].append(len(wanted & set(b.dia_of.get(c.memory, []))))
            cols["half"].append(b.conv.sample_id in locomo.HALF_A)
            cols["category"].append(q.category)
            cols["evidence"].append(len(q.evidence))
            qi += 1
    return Dump(layout, *(np.asarray(cols[k]) for k in _ARRAYS))


# -- ranking the dumped candidates as Recall.search does -------------------------------------------


def first_ten(score: Array, d: Dump, rows: Array) -> Array:
    """The rows (of ``rows``, one question's) of its first ten memories: sorted by score (ties by
    ``order``), one per memory, the first 20 re-sorted with keyword coverage."""
    idx = rows[np.lexsort((d.order[rows], -score[rows]))]
    _, first = np.unique(d.memory[idx], return_index=True)
    best = idx[np.sort(first)][:20]
    final = score[best] + LEXICAL_WEIGHT * d.lexical[best]
    return best[np.argsort(-final, kind="stable")][:10]


def recall_at_10(score: Array, d: Dump) -> dict[str, float]:
    by_q = np.split(np.arange(len(d.question)), np.flatnonzero(np.diff(d.question)) + 1)
    r10 = np.zeros(len(d.half))
    for rows in by_q:
        q = d.question[rows[0]]
        r10[q] = min(d.hits[first_ten(score, d, rows)].sum() / d.evidence[q], 1.0)
    parts = {"all": r10, "A": r10[d.half], "B": r10[~d.half]}
    for cat in (1, 3):
        parts[f"c{cat}"] = r10[d.category == cat]
    # as bench.locomo's Tally: a part with no questions reads 0
    return {k: round(100 * float(v.mean()), 1) if len(v) else 0.0 for k, v in parts.items()}


def hand(d: Dump) -> Array:
    f = {name: d.x[:, i] for i, name in enumerate(FEATURES)}
    return f["keyword"] + HAND.vector * f["meaning"] + HAND.person * f["person"] + HAND.group * f["session"]


def learned_score(model: Learned, d: Dump) -> Array:
    coef = np.array([getattr(model, name) for name in FEATURES])
    out: Array = d.x @ coef + d.nudge
    return out


# -- fitting -----------------------------------------------------------------------------------------


def pairs(d: Dump, use: Array, window: int, fitted: Sequence[str]) -> tuple[Array, Array]:
    """Feature differences (evidence memory − other memory) and their weights (1 per question)."""
    cols = [FEATURES.index(f) for f in fitted]
    base = hand(d) + d.nudge
    diffs: list[Array] = []
    weights: list[Array] = []
    by_q = np.split(np.arange(len(d.question)), np.flatnonzero(np.diff(d.question)) + 1)
    for rows in by_q:
        if not use[d.question[rows[0]]]:
            continue
        idx = rows[np.lexsort((d.order[rows], -base[rows]))]
        _, first = np.unique(d.memory[idx], return_index=True)
        idx = idx[np.sort(first)]  # one chunk per memory: its best
        pos = idx[d.hits[idx] > 0]
        neg = idx[:window][d.hits[idx[:window]] == 0]
        if len(pos) == 0 or len(neg) == 0:
            continue
        x = d.x[:, cols]
        diff = (x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, len(cols))
        diffs.append(diff)
        weights.append(np.full(len(diff), 1.0 / len(diff)))
    return np.concatenate(diffs), np.concatenate(weights)


def fit(x: Array, w: Array, l2: float) -> Array:
    """Logistic regression without intercept on differences (every label 1), by Newton's method."""
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        grad = x.T @ (w * (1.0 - p)) - l2 * beta
        hess = (x * (w * p * (1.0 - p))[:, None]).T @ x + l2 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def lists(d: Dump, use: Array, fitted: Sequence[str]) -> list[tuple[Array, Array]]:
    """Per question of ``use``: its memories' signals (each memory's best chunk by the hand-set
    score) and which hold evidence."""
    cols = [FEATURES.index(f) for f in fitted]
    base = hand(d) + d.nudge
    out = []
    for rows in np.split(np.arange(len(d.question)), np.flatnonzero(np.diff(d.question)) + 1):
        if not use[d.question[rows[0]]]:
            continue
        idx = rows[np.lexsort((d.order[rows], -base[rows]))]
        _, first = np.unique(d.memory[idx], return_index=True)
        idx = idx[np.sort(first)]
        label = d.hits[idx] > 0
        if label.any() and not label.all():
            out.append((d.x[idx][:, cols], label))
    return out


def fit_softmax(groups: Sequence[tuple[Array, Array]], l2: float) -> Array:
    """Listwise: each question's evidence memories' mean log-softmax over its candidates,
    maximised (every question weighing the same, L2) by Newton's method with backtracking."""
    n = len(groups)

    def objective(beta: Array) -> float:
        total = -0.5 * l2 * float(beta @ beta)
        for x, label in groups:
            z = x @ beta
            top = z.max()
            total += (z[label].mean() - top - np.log(np.exp(z - top).sum())) / n
        return total

    beta = np.zeros(groups[0][0].shape[1])
    current = objective(beta)
    for _ in range(100):
        grad = -l2 * beta
        hess = l2 * np.eye(len(beta))
        for x, label in groups:
            z = x @ beta
            p = np.exp(z - z.max())
            p /= p.sum()
            mean = p @ x
            grad += (x[label].mean(axis=0) - mean) / n
            centred = x - mean
            hess += (centred * p[:, None]).T @ centred / n
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while size > 1e-6 and objective(beta + size * step) < current:
            size /= 2
        beta = beta + size * step
        now = objective(beta)
        if abs(now - current) < 1e-10:
            break
        current = now
    return beta


def model_of(beta: Array, fitted: Sequence[str]) -> Learned:
    coef = dict(zip(fitted, (float(b) for b in beta), strict=True))
    if coef.get("keyword", 0.0) <= 0:
        raise SystemExit(f"the keyword signal came out {coef.get('keyword')}: not a usable scale")
    scale = coef["keyword"]
    return Learned(**{f.name: round(coef.get(f.name, 0.0) / scale, 4) for f in fields(Learned)})


def fit_model(
    dumps: Sequence[Dump],
    use: Sequence[Array],
    window: int,
    l2: float,
    fitted: Sequence[str],
    objective: str = "pairwise",
) -> Learned:
    if objective == "softmax":
        groups = [g for d, u in zip(dumps, use, strict=True) for g in lists(d, u, fitted)]
        return model_of(fit_softmax(groups, l2), fitted)
    parts = [pairs(d, u, window, fitted) for d, u in zip(dumps, use, strict=True)]
    x = np.concatenate([p[0] for p in parts])
    w = np.concatenate([p[1] for p in parts]) / len(parts)
    return model_of(fit(x, w, l2), fitted)


# -- the command line --------------------------------------------------------------------------------


def cmd_dump(args: argparse.Namespace) -> int:
    from engine.embed.cache import EmbeddingCache
    from engine.embed.local import LocalEmbedder

    embedder = LocalEmbedder()
    args.out.mkdir(parents=True, exist_ok=True)
    for layout in args.layout.split(","):
        convs = locomo.load(args.path or locomo_path(), layout)
        cache = EmbeddingCache(args.cache)
        built = locomo.build_all(
            convs, args.keep / f"{args.mode}-{layout}", args.mode, embedder, cache, keep=True
        )
        d = dump(built, layout, RecallSettings())
        d.save(args.out / f"{args.mode}-{layout}.npz")
        print(f"{layout}: {len(d.half)} questions, {len(d.question)} candidates", file=sys.stderr)
        for b in built:
            b.indexer.stop()
            b.workspace.close()
        cache.close()
    return 0


def compare(model: Learned, dumps: list[Dump]) -> None:
    """Print each dump's R@10 by the hand-set weights and by ``model``."""
    for d in dumps:
        hand_r10, learned_r10 = recall_at_10(hand(d) + d.nudge, d), recall_at_10(learned_score(model, d), d)
        print(d.layout, "hand", hand_r10, "learned", learned_r10)


def cmd_fit(args: argparse.Namespace) -> int:
    dumps = [Dump.load(p) for p in args.dumps]
    fitted = args.features.split(",")
    model = fit_model(dumps, [d.half for d in dumps], args.window, args.l2, fitted, args.objective)
    print(json.dumps(model.__dict__))
    if args.cv:  # leave one conversation of half A out: is the fit better on what it did not see?
        compare(model, dumps)
    if args.write:
        payload = {
            "about": "Learned fusion weights (engine.recall.fusion.Learned); do not edit by hand.",
            "produced_by": f"python -m bench.fit_fusion fit {' '.join(p.name for p in args.dumps)} "
            f"--objective {args.objective} --l2 {args.l2} --features {args.features}"
            + (f" --window {args.window}" if args.objective == "pairwise" else ""),
            "data": "LoCoMo dev split, half A only (conv-26, conv-44, conv-47), engine mode; "
            "half B (conv-48, conv-50) left out to confirm",
            "layouts": [d.layout for d in dumps],
            "objective": OBJECTIVES[args.objective].format(window=args.window, l2=args.l2),
            "fitted": datetime.now(UTC).strftime("%Y-%m-%d"),
            "weights": model.__dict__,
        }
        args.write.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    model = load_learned(args.weights) if args.weights else load_learned()
    compare(model, [Dump.load(p) for p in args.dumps])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fit_fusion", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="dump every question's candidates and signals")
    d.add_argument("path", nargs="?", type=Path)
    d.add_argument("--layout", default="speaker")
    d.add_argument("--mode", choices=["engine", "mcp"], default="engine")
    d.add_argument("--keep", type=Path, required=True, help="workspaces, as bench.locomo --keep")
    d.add_argument("--cache", type=Path, required=True, help="the embedding cache, as bench.locomo --cache")
    d.add_argument("--out", type=Path, required=True, help="a folder outside the project")
    f = sub.add_parser("fit", help="fit on half A")
    f.add_argument("dumps", nargs="+", type=Path)
    f.add_argument("--window", type=int, default=50)
    f.add_argument("--l2", type=float, default=1e-4)
    f.add_argument("--features", default=",".join(FITTED))
    f.add_argument("--objective", choices=["pairwise", "softmax"], default="softmax")
    f.add_argument("--cv", action="store_true", help="also print R@10 per half of every dump")
    f.add_argument("--write", type=Path)
    e = sub.add_parser("eval", help="R@10 per half, hand-set and learned, from the dumps")
    e.add_argument("dumps", nargs="+", type=Path)
    e.add_argument("--weights", type=Path)
    args = parser.parse_args(argv)
    return {"dump": cmd_dump, "fit": cmd_fit, "eval": cmd_eval}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
