"""Function tools for the framework adapter tests (scanned as `_framework_tools`, tests/ on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from toolroute import function_tool

LOG_ENV = "TOOLROUTE_FRAMEWORK_LOG"


class WordStats(BaseModel):
    words: int
    longest: str


@function_tool(read_only=True, idempotent=True)
def word_stats(text: str) -> WordStats:
    """Count the words of a text and find the longest."""
    words = text.split()
    return WordStats(words=len(words), longest=max(words, key=len) if words else "")


@function_tool
def explode(reason: str = "boom") -> str:
    """Always raises (a tool with a bug)."""
    raise RuntimeError(f"exploded: {reason}")


@function_tool
def record(tag: str) -> str:
    """Append a line to the run's log: proof that (and how often) the call ran."""
    with Path(os.environ[LOG_ENV]).open("a") as log:
        log.write(tag + "\n")
    return f"recorded {tag}"
