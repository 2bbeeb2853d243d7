"""Issue 46: tool search over BFCL's catalogue (2,555 function documents, 2,061 questions;
tests/fixtures/bfcl), toolroute's Rust BM25F against plain BM25 (`bm25s`, default settings,
each document as its JSON text) a user would otherwise pick.

Quality first (recall@1 / recall@5, strict and by name, for both), then speed, interleaved:
answering all 2,061 questions (top 5 each), and building the index. The rankings differ by
design, so the timing's like-for-like check is on the work (the same questions, the same k),
not on equal answers; the recall lines say how the answers differ.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _bfcl import corpus, recall  # testing/, on the path (pyproject's pytest `pythonpath`)
from _interleave import compare

from toolroute._core import ToolSearchIndex
from toolroute.toolsearch import document

bm25s = pytest.importorskip("bm25s", reason="the plain-BM25 peer: pip install bm25s (in the [bench] extra)")


def _bm25s_recall(index: Any, documents: list[dict[str, Any]], queries: list[tuple[str, int, str]]) -> dict[str, float]:
    names = [f["name"] for f in documents]
    hits = {"strict@1": 0, "strict@5": 0, "name@1": 0, "name@5": 0}
    found, _ = index.retrieve(
        bm25s.tokenize([q for q, _, _ in queries], stopwords="en", show_progress=False), k=5, show_progress=False
    )
    for (_, target, name), row in zip(queries, found, strict=True):
        top = [int(n) for n in row]
        hits["strict@1"] += top[0] == target
        hits["strict@5"] += target in top
        hits["name@1"] += names[top[0]] == name
        hits["name@5"] += name in {names[n] for n in top}
    return {k: round(v / len(queries), 3) for k, v in hits.items()}


def _bm25s_index(documents: list[dict[str, Any]]) -> Any:
    index = bm25s.BM25()
    index.index(
        bm25s.tokenize([json.dumps(f) for f in documents], stopwords="en", show_progress=False), show_progress=False
    )
    return index


def test_recall_and_speed_against_plain_bm25() -> None:
    documents, queries = corpus()
    plain = _bm25s_index(documents)
    print(f"\nBFCL recall, toolroute: {recall(one_per_name=False)}; one per name: {recall(one_per_name=True)}")
    print(f"BFCL recall, bm25s: {_bm25s_recall(plain, documents, queries)}")
    ours = ToolSearchIndex([document(f) for f in documents])
    texts = [q for q, _, _ in queries]

    def toolroute_queries() -> int:  # questions answered (ours returns fewer than 5 when fewer share a word)
        return sum(1 for q in texts if ours.search(q, 5) is not None)

    def bm25s_queries() -> int:
        found, _ = plain.retrieve(bm25s.tokenize(texts, stopwords="en", show_progress=False), k=5, show_progress=False)
        return len(found)

    compare(
        "tool search: 2,061 BFCL questions, top 5",
        ("toolroute", toolroute_queries),
        {"bm25s": bm25s_queries},
        rounds=5,
        same=lambda a, b: a == b,
    )
    compare(
        "tool search: index 2,555 BFCL documents",
        ("toolroute", lambda: len(ToolSearchIndex([document(f) for f in documents]))),
        {"bm25s": lambda: len(documents) if _bm25s_index(documents) is not None else 0},
        rounds=5,
    )
