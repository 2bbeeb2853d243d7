"""Tool search's retrieval quality on a corpus nobody here wrote: BFCL (tests/fixtures/bfcl,
Apache-2.0). Every question of the single- and multiple-function categories is a query, its
ground-truth function the target, and the haystack is every distinct function document of BFCL's
ten single-turn categories with functions (2,555 documents, 1,437 names).

Measured (docs/tool_search.md): recall@1 / recall@5 strict (the entry's own document) 0.366 /
0.680 and by name 0.699 / 0.865; with one result per name (a real catalogue has unique names)
by name 0.699 / 0.914. Plain BM25 (`bm25s`, default settings, over the same documents as JSON
text) scores 0.373 / 0.644 strict and 0.661 / 0.828 by name here (`benches/bench_toolsearch.py`
runs both). The floors below guard those numbers; the deterministic ranking gives them exactly.
"""

from __future__ import annotations

from _bfcl import corpus, recall


def test_the_haystack_and_queries_are_bfcls_own() -> None:
    documents, queries = corpus()
    assert len(documents) == 2555
    assert len({f["name"] for f in documents}) == 1437
    assert len(queries) == 2061


def test_recall_on_bfcl_stays_ahead_of_plain_bm25() -> None:
    ranked = recall(one_per_name=False)
    assert ranked["strict@1"] >= 0.36 and ranked["strict@5"] >= 0.675
    assert ranked["name@1"] >= 0.69 and ranked["name@5"] >= 0.86
    distinct = recall(one_per_name=True)
    assert distinct["name@5"] >= 0.91
