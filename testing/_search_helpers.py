"""Trees for the grep/glob tests and the rg parity test (real files in temporary directories)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

RG = shutil.which("rg")


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def router_for(root: Path, **limits: Any) -> ToolRouter:
    from toolroute.context import ToolLimits

    ctx = BuiltInToolContext(root, limits=ToolLimits(**limits)) if limits else BuiltInToolContext(root)
    return ToolRouter(context=ctx)


def call(router: ToolRouter, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
    """Invoke through the router with a JSON string, as a model would; returns (text, trace)."""
    out = router.execute(tool, json.dumps(args))
    return out.text, out.trace


def small_tree(root: Path) -> Path:
    """A workspace with ignore files, hidden files, binary and non-UTF-8 files."""
    write(root, "a.py", "import os\nneedle = 1\n\nprint(needle)\n")
    write(root, "src/lib.rs", "fn needle() {}\nfn other() {}\n")
    write(root, "src/app.js", "const needle = 'x';\n")
    write(root, "build/out.py", "needle\n")
    write(root, "notes.log", "needle\n")
    write(root, ".hidden/h.py", "needle\n")
    write(root, ".gitignore", "build/\n*.log\n")
    write(root, "bin.dat", b"needle\x00\x01\x02binary")
    write(root, "latin1.txt", b"caf\xe9 needle\n")
    write(root, "empty.txt", b"")
    return root


# ---- the parity tree --------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "needle", "haystack", "foo", "bar", "id", "idx", "café", "naïve"]
EXTS = [".py", ".rs", ".txt", ".md", ".js", ".log", ".tmp"]


def _line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.12:
        return f"def {rng.choice(WORDS)}_{rng.randint(0, 99)}(x):"
    if kind < 0.16:
        return f"class {rng.choice(WORDS).capitalize()}:"
    if kind < 0.20:
        return f"import {rng.choice(WORDS)}"
    if kind < 0.23:
        return f"# TODO {rng.choice(WORDS)} {rng.randint(1000, 9999)}"
    if kind < 0.25:
        return "foo.bar = NEEDLE" if rng.random() < 0.5 else "fooxbar = Needle"
    if kind < 0.27:
        return "BEGIN block"
    if kind < 0.29:
        return "END block"
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))


def parity_tree(root: Path, files: int = 5000, seed: int = 4) -> Path:
    """A git work tree (a bare `.git` dir) of `files` files with nested .gitignore/.ignore files."""
    rng = random.Random(seed)
    (root / ".git" / "info").mkdir(parents=True)
    write(root, ".git/info/exclude", "secret_*.txt\n")
    write(root, ".gitignore", "*.log\nbuild/\n/top_only.txt\n")
    write(root, "top_only.txt", "needle\n")
    dirs = [f"pkg{i}" for i in range(10)]
    dirs += [f"{d}/sub{j}" for d in dirs for j in range(5)]
    dirs += [f"{d}/deep{k}" for d in dirs[10:30] for k in range(3)]
    dirs += ["build", "pkg1/build", ".config", "pkg2/generated"]
    write(root, "pkg3/.gitignore", "*.tmp\n!keep.tmp\nsub1/\n")
    write(root, "pkg4/.ignore", "*.md\n")
    write(root, "pkg5/sub2/.gitignore", "/only_here.txt\nnested*/\n")
    write(root, "pkg2/.gitignore", "generated/\n")
    write(root, "pkg3/keep.tmp", "needle kept\n")
    write(root, "pkg5/sub2/only_here.txt", "needle\n")
    write(root, "pkg5/sub2/nested1/x.txt", "needle\n")
    made = 8
    while made < files:
        d = rng.choice(dirs)
        ext = rng.choice(EXTS)
        name = f"{d}/{rng.choice(['f', 'mod', 'secret_', 'data'])}{made}{ext}"
        roll = rng.random()
        if roll < 0.02:
            content: bytes = b"needle\x00" + bytes(rng.randrange(256) for _ in range(64))
        elif roll < 0.04:
            content = ("caf\xe9 needle\n" * 3).encode("latin-1") + b"\xff\xfe plain\n"
        elif roll < 0.05:
            content = b""
        else:
            body = "\n".join(_line(rng) for _ in range(rng.randint(1, 40)))
            content = (body + ("\n" if rng.random() < 0.9 else "")).encode()
        write(root, name, content)
        made += 1
    return root


def rg_argv(pattern: str, opts: dict[str, Any]) -> list[str]:
    """The rg command line equivalent to a toolroute grep call."""
    argv = [RG or "rg", "--no-heading", "-n", "--with-filename", "-0", "--no-messages", "--color=never"]
    flags = {"case_insensitive": "-i", "fixed_strings": "-F", "word": "-w", "hidden": "--hidden"}
    flags |= {"no_ignore": "--no-ignore", "text": "-a", "follow_symlinks": "-L"}
    for key, flag in flags.items():
        if opts.get(key):
            argv.append(flag)
    if opts.get("multiline"):
        argv += ["-U", "--multiline-dotall"]
    for g in opts.get("glob", []):
        argv += ["-g", g]
    for t in opts.get("type", []):
        argv += ["-T", t[1:]] if t.startswith("!") else ["-t", t]
    for key, flag in (("max_count", "-m"), ("context", "-C"), ("before", "-B"), ("after", "-A")):
        if opts.get(key) is not None:
            argv += [flag, str(opts[key])]
    # An explicit path: with none, rg would search stdin whenever stdin is a pipe.
    return [*argv, "-e", pattern, "./"]


def rg_rows(root: Path, pattern: str, opts: dict[str, Any]) -> set[tuple[str, int, str]]:
    """(path, line, kind) of every match and context line rg prints."""
    argv = rg_argv(pattern, opts)
    proc = subprocess.run(argv, cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
    rows: set[tuple[str, int, str]] = set()
    for raw in proc.stdout.split(b"\n"):
        if not raw or raw == b"--":
            continue
        path, _, rest = raw.partition(b"\x00")
        digits = bytearray()
        for b in rest:
            if not chr(b).isdigit():
                kind = "match" if chr(b) == ":" else "context"
                break
            digits.append(b)
        rows.add((path.decode().removeprefix("./"), int(digits), kind))
    return rows
