"""Issue 12/16 file-tool benchmarks, each side by side with the alternative, INTERLEAVED (A then B
in every round), results checked equal, reported as ratios of medians at the end of the module.

Run: python -m pytest benches/bench_files_confine.py --benchmark-only -s

- read_file and write_file per call (descriptor confinement) vs a plain Python baseline that
  checks `os.path.realpath` against the root and then reads / writes atomically (tempfile, fsync,
  os.replace, folder fsync): the code a user would write without toolroute.
- read_file of the first page (20 lines) of a 15 MB file vs reading it whole (today's way) and
  vs a careful Python `readline` loop.
- apply_patch of 1 hunk and of 20 files at each durability level, vs the PyPI `codex-apply-patch`
  package (which never fsyncs, so `none` is the like-for-like level), and vs the Codex CLI's own
  apply_patch (PyPI `openai-codex-cli-bin`, the `parity` extra; a process per patch, as Codex runs
  it).
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

RATIOS: dict[str, tuple[float, float, str]] = {}
ROUNDS = 200


def interleaved(name: str, ours: Callable[[], object], theirs: Callable[[], object], label: str, rounds: int) -> None:
    """Alternate the two in each round; keep the medians."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs()
        b.append(time.perf_counter() - t)
    RATIOS[name] = (statistics.median(a), statistics.median(b), label)


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = ["", "file tools, interleaved medians (toolroute / alternative):"]
    for name, (ours, theirs, label) in RATIOS.items():
        lines.append(
            f"  {name}: toolroute {ours * 1e6:.1f} us, {label} {theirs * 1e6:.1f} us, ratio {ours / theirs:.2f}x"
        )
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        for line in lines:
            reporter.write_line(line) if reporter else print(line)


def _plain_read(root: str, rel: str, lines: int) -> str:
    real = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([real, root]) != root:
        raise PermissionError(rel)
    with open(real, encoding="utf-8") as f:
        text = f.read()
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(text.splitlines()[:lines], 1))


def _plain_write(root: str, rel: str, content: str, sync: bool) -> None:
    real = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([real, root]) != root:
        raise PermissionError(rel)
    folder = os.path.dirname(real)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, real)
    if sync:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench-files").resolve()
    (root / "src").mkdir()
    (root / "src/small.py").write_text("".join(f"line {i}\n" for i in range(20)))
    with open(root / "big.txt", "w") as f:
        i = 0
        while f.tell() < 15 * 1024 * 1024:
            f.write(f"this is line number {i} of a large text file, padded to look like code\n")
            i += 1
    return root


def test_read_file_per_call(benchmark: Any, workspace: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(workspace))
    root = str(workspace)
    ours = router.invoke("read_file", {"path": "src/small.py"})
    assert ours == _plain_read(root, "src/small.py", 2000)
    interleaved(
        "read_file 20-line file, per call",
        lambda: router.invoke("read_file", {"path": "src/small.py"}),
        lambda: _plain_read(root, "src/small.py", 2000),
        "realpath+open+read",
        ROUNDS * 5,
    )
    benchmark(router.invoke, "read_file", {"path": "src/small.py"})


@pytest.mark.parametrize("durability", ["none", "full"])
def test_write_file_per_call(benchmark: Any, workspace: Path, durability: str) -> None:
    router = ToolRouter(context=BuiltInToolContext(workspace, durability=durability))  # type: ignore[arg-type]
    root, sync = str(workspace), durability == "full"
    content = "x = 1\n" * 50
    interleaved(
        f"write_file 300 bytes, durability={durability}",
        lambda: router.invoke("write_file", {"path": "src/w1.py", "content": content}),
        lambda: _plain_write(root, "src/w2.py", content, sync),
        "realpath+mkstemp+replace" + ("+fsyncs" if sync else ""),
        ROUNDS,
    )
    assert (workspace / "src/w1.py").read_text() == (workspace / "src/w2.py").read_text() == content
    benchmark(router.invoke, "write_file", {"path": "src/w1.py", "content": content})


def test_read_first_page_of_15mb(benchmark: Any, workspace: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(workspace))
    root = str(workspace)
    args = {"path": "big.txt", "limit": 20}
    ours = router.invoke("read_file", args)
    assert ours.splitlines()[:20] == _plain_read(root, "big.txt", 20).splitlines()

    def readline_loop() -> str:
        with open(os.path.join(root, "big.txt"), encoding="utf-8") as f:
            return "\n".join(f"{n:>6}\t{f.readline().rstrip()}" for n in range(1, 21))

    interleaved(
        "read_file first 20 lines of 15 MB",
        lambda: router.invoke("read_file", args),
        lambda: _plain_read(root, "big.txt", 20),
        "read whole+split (today's way)",
        30,
    )
    interleaved(
        "read_file first 20 lines of 15 MB ",
        lambda: router.invoke("read_file", args),
        readline_loop,
        "Python readline x20",
        ROUNDS,
    )
    benchmark(router.invoke, "read_file", args)


def _tree(root: Path, files: int) -> None:
    for i in range(files):
        (root / f"m{i:02}.py").write_text("".join(f"def f{n}():\n    return {n}\n" for n in range(40)))


def _patch(files: int, a: str, b: str) -> str:
    body = ["*** Begin Patch"]
    for i in range(files):
        body += [f"*** Update File: m{i:02}.py", "@@ def f20():", f"-    return {a}", f"+    return {b}"]
    return "\n".join([*body, "*** End Patch"]) + "\n"


def _codex_cli(home: Path) -> Callable[[str, Path], None] | None:
    """The Codex CLI's apply_patch (run as `apply_patch`, its argv[0] role: no configuration, no
    network), or None when `openai-codex-cli-bin` is not installed."""
    try:
        import codex_cli_bin  # type: ignore[import-not-found, unused-ignore]

        binary = Path(codex_cli_bin.bundled_codex_path())
    except (ImportError, FileNotFoundError):
        return None
    home.mkdir(exist_ok=True)
    alias = home / "apply_patch"
    alias.symlink_to(binary)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home), "LANG": "C.UTF-8"}

    def run(patch: str, cwd: Path) -> None:
        subprocess.run([str(alias), patch], cwd=cwd, env=env, capture_output=True, check=True, timeout=60)

    return run


@pytest.mark.parametrize("files", [1, 20])
@pytest.mark.parametrize("durability", ["none", "file", "full"])
def test_apply_patch_vs_codex(benchmark: Any, tmp_path: Path, files: int, durability: str) -> None:
    """Issue 16 target: at least as fast as `codex-apply-patch` at the same durability (it writes
    in place, never fsyncs: `none` is the like-for-like level); issue 62: 20 files at `full` at
    least as fast as Codex's apply_patch. Rotated interleaving by benches/_interleave.py; each
    side applies the patch and its reverse in turn, in a tree of its own."""
    from _interleave import compare

    try:
        import codex_apply_patch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        codex_apply_patch = None
    cli = _codex_cli(tmp_path / "codex-home")
    if codex_apply_patch is None and cli is None:
        pytest.skip("neither codex-apply-patch nor openai-codex-cli-bin is installed")
    roots = {side: tmp_path / side for side in ("ours", "package", "cli")}
    for root in roots.values():
        root.mkdir()
        _tree(root, files)
    router = ToolRouter(context=BuiltInToolContext(roots["ours"], durability=durability))  # type: ignore[arg-type]
    patches = (_patch(files, "20", "21"), _patch(files, "21", "20"))
    state = dict.fromkeys(roots, 0)

    def next_patch(side: str) -> str:
        state[side] += 1
        return patches[(state[side] - 1) % 2]

    def ours() -> None:
        router.invoke("apply_patch", {"patch": next_patch("ours")})

    alternatives: dict[str, Callable[[], None]] = {}
    if codex_apply_patch is not None:

        def package() -> None:
            cwd = os.getcwd()
            os.chdir(roots["package"])  # codex-apply-patch works relative to the current folder
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # it prints a summary of every patch
                    codex_apply_patch.apply_patch(next_patch("package"))
            finally:
                os.chdir(cwd)

        alternatives["codex-apply-patch (in place, no fsync)"] = package
    if cli is not None:

        def codex_cli() -> None:
            cli(next_patch("cli"), roots["cli"])

        alternatives["Codex CLI apply_patch (a process per patch, no fsync)"] = codex_cli
    results = compare(f"apply_patch {files} file(s), durability={durability}", ("toolroute", ours), alternatives, 100)
    tree = {p.name: p.read_text() for p in roots["ours"].iterdir()}
    for side, root in roots.items():
        if state[side]:
            assert tree == {p.name: p.read_text() for p in root.iterdir()}, side
    RATIOS[f"apply_patch {files} file(s), durability={durability}"] = (
        results[0].toolroute_median_s,
        results[0].alternative_median_s,
        results[0].alternative,
    )
    benchmark.pedantic(ours, rounds=20)
