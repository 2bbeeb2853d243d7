"""Model-style apply_patch cases from a seed, for the differential test against the reference.

A case is a small tree of code-like files and one patch written the way models write them: hunks
with a little context, `@@ def …` anchors, the first hunk without `@@`, a bare empty line before
appended lines, additions at the end of a file (with or without `*** End of File`, and blank
lines after it), context with its whitespace or Unicode punctuation "tidied", CRLF, mixed-ending
and BOM files, files without a final newline, adds, deletes and moves; now and then a hunk whose
context is wrong.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = ["load", "save", "parse", "render", "check", "merge", "split", "fetch"]
STATEMENTS = [
    "return {n}",
    "x = x + {n}",
    "if x > {n}:",
    "    x -= 1",
    "items.append({n})",
    "# step {n}",
    'msg = "it\u2019s \u2014 {n}"',
    "total = {n}  ",
    "\tlegacy = {n}",
    "",
]
UNICODE_TO_ASCII = str.maketrans({"\u2019": "'", "\u2014": "-", "\u201c": '"', "\u201d": '"'})


@dataclass
class Case:
    files: dict[str, bytes]
    patch: str


def _source_lines(rng: random.Random) -> list[str]:
    lines: list[str] = []
    for _ in range(rng.randint(1, 4)):
        lines.append(f"def {rng.choice(NAMES)}_{rng.randint(0, 9)}(x):")
        for _ in range(rng.randint(1, 4)):
            lines.append("    " + rng.choice(STATEMENTS).format(n=rng.randint(0, 99)) if rng.random() < 0.9 else "")
        lines.append("")
        if rng.random() < 0.2:
            lines.append("")
    if rng.random() < 0.5:
        while lines and lines[-1] == "":
            lines.pop()
    return lines or ["pass"]


def _encode(lines: list[str], rng: random.Random) -> tuple[bytes, int]:
    """The file's bytes, and the first line a patch may touch (a BOM is only on line 0)."""
    style = rng.random()
    endings = ["\r\n" if (style < 0.2 or (style < 0.3 and rng.random() < 0.5)) else "\n" for _ in lines]
    text = "".join(line + eol for line, eol in zip(lines, endings, strict=True))
    if rng.random() < 0.1:
        text = text[: -len(endings[-1])]  # no final newline
    bom = rng.random() < 0.05
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode(), 1 if bom else 0


def _tidy(line: str, rng: random.Random) -> str:
    """How a model may retype a line it quotes as context or as a removed line."""
    roll = rng.random()
    if roll < 0.06:
        return line.rstrip()
    if roll < 0.09:
        return line.strip()
    if roll < 0.12:
        return line.translate(UNICODE_TO_ASCII)
    return line


def _new_lines(rng: random.Random, tag: str) -> list[str]:
    return [f"    added_{tag}_{i} = {rng.randint(0, 9)}" for i in range(rng.randint(1, 3))]


def _update_body(lines: list[str], first: int, rng: random.Random, tag: str) -> list[str]:
    body: list[str] = []
    pos = first
    n = len(lines)
    for k in range(rng.randint(1, 3)):
        if pos >= n:
            break
        start = rng.randint(pos, min(n - 1, pos + 8))
        before = rng.randint(0, min(3, n - start))
        removed = rng.randint(0, min(2, n - start - before))
        after = rng.randint(0, min(2, n - start - before - removed))
        added = _new_lines(rng, f"{tag}{k}") if (removed == 0 or rng.random() < 0.8) else []
        if before + removed + after == 0:  # a pure addition: Codex puts it at the end of the file
            start, before, after = n, 0, 0
        header = "@@"
        defs = [i for i in range(pos, start) if lines[i].startswith("def ")]
        if defs and rng.random() < 0.3:
            header = "@@ " + lines[defs[-1]] + (" " if rng.random() < 0.2 else "")
        if not body and header == "@@" and rng.random() < 0.3:
            header = ""  # the first hunk may omit @@
        if header:
            body.append(header)

        def quote(line: str, mark: str) -> str:
            line = _tidy(line, rng)
            return "" if (mark == " " and line == "" and rng.random() < 0.5) else mark + line

        ctx = lines[start : start + before]
        gone = lines[start + before : start + before + removed]
        tail = lines[start + before + removed : start + before + removed + after]
        if rng.random() < 0.05 and (ctx or gone):
            ctx = [*ctx[:-1], "no such line in the file"] if ctx else ctx
            gone = gone if ctx else ["no such line in the file"]
        body += [quote(c, " ") for c in ctx] + [quote(g, "-") for g in gone]
        at_end = start + before + removed + after == n
        if at_end and after == 0 and added and rng.random() < 0.4:
            body.append("")  # the blank line models put before appended lines
        body += ["+" + a for a in added] + [quote(t, " ") for t in tail]
        if at_end and rng.random() < 0.3:
            body.append("*** End of File")
            if rng.random() < 0.3:
                body.append(rng.choice(["", "  "]))  # blank lines after the marker are skipped
        pos = start + before + removed + after
        if pos >= n:
            break
    return body


def generate(seed: int) -> Case:
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    firsts: dict[str, int] = {}
    texts: dict[str, list[str]] = {}
    for i in range(rng.randint(1, 3)):
        path = rng.choice(["", "src/", "pkg/sub/"]) + f"m{i}.py"
        texts[path] = _source_lines(rng)
        files[path], firsts[path] = _encode(texts[path], rng)
    sections: list[str] = []
    for j, path in enumerate(rng.sample(sorted(files), rng.randint(1, len(files)))):
        roll = rng.random()
        if roll < 0.1:
            sections.append(f"*** Delete File: {path}")
            continue
        body = _update_body(texts[path], firsts[path], rng, f"f{j}")
        if not body:
            continue
        sections.append(f"*** Update File: {path}")
        if roll > 0.85:
            sections.append(f"*** Move to: moved/{path}")
        sections += body
    if rng.random() < 0.3:
        sections.append("*** Add File: new/added.py")
        sections += ["+" + line for line in _new_lines(rng, "new")]
    patch = "\n".join(["*** Begin Patch", *sections, "*** End Patch"])
    if rng.random() < 0.5:
        patch += "\n"
    return Case(files, patch)
