"""BFCL (tests/fixtures/bfcl, Apache-2.0) as a tool-search corpus: its function documents and
its questions, and tool search's recall over them. Shared by the quality test
(tests/toolsearch/test_toolsearch_bfcl.py) and the benchmark (benches/bench_toolsearch.py)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

from toolroute._core import ToolSearchIndex
from toolroute.toolsearch import document

BFCL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "bfcl"
HAYSTACK = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "live_simple",
    "live_multiple",
    "parallel",
    "parallel_multiple",
    "live_parallel",
    "live_parallel_multiple",
)


def _rows(name: str) -> list[dict[str, Any]]:
    with gzip.open(BFCL / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _key(function: dict[str, Any]) -> str:
    return json.dumps(function, sort_keys=True)


@cache
def corpus() -> tuple[list[dict[str, Any]], list[tuple[str, int, str]]]:
    """(the haystack's documents, and each query as (question, target document, target name))."""
    entries = {row["id"]: row for row in _rows("corpus.jsonl.gz")}
    documents: dict[str, dict[str, Any]] = {}
    for entry_id, row in entries.items():
        if entry_id.rsplit("_", 1)[0] in HAYSTACK:
            for function in row["function"]:
                documents.setdefault(_key(function), function)
    number = {key: n for n, key in enumerate(documents)}
    queries = []
    for question in _rows("questions.jsonl.gz"):
        entry = entries[question["id"]]
        truth = entry.get("ground_truth")
        if not truth:
            continue
        target = next(iter(truth[0]))
        own = [f for f in entry["function"] if f["name"] == target]
        if own:
            queries.append((question["question"], number[_key(own[0])], target))
    return list(documents.values()), queries


def recall(one_per_name: bool) -> dict[str, float]:
    documents, queries = corpus()
    index = ToolSearchIndex([document(f) for f in documents])
    names = [f["name"] for f in documents]
    hits = {"strict@1": 0, "strict@5": 0, "name@1": 0, "name@5": 0}
    for question, target, target_name in queries:
        top: list[int] = []
        for n, _ in index.search(question, 100):
            if one_per_name and names[n] in {names[t] for t in top}:
                continue
            top.append(n)
            if len(top) == 5:
                break
        hits["strict@1"] += bool(top) and top[0] == target
        hits["strict@5"] += target in top
        hits["name@1"] += bool(top) and names[top[0]] == target_name
        hits["name@5"] += target_name in {names[n] for n in top}
    return {k: v / len(queries) for k, v in hits.items()}
