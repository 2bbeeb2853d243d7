"""The reference apply_patch: the Codex CLI binary of PyPI `openai-codex-cli-bin` (the `parity` extra).

The binary dispatches on argv[0] before anything else (codex-rs/arg0): named `apply_patch`, it only
applies the patch given as its argument to the current folder, without reading any configuration
or opening a network connection. It is still run with a scratch CODEX_HOME and HOME, and inside a
new network namespace when the kernel allows one (`unshare -rn`).

Also the tree helpers the parity tests share: a tree is a dict of relative path -> exact bytes,
plus `path/` -> None for each empty folder (Codex leaves a moved file's folder behind).
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REFERENCE_VERSION = "0.163.0"
Tree = dict[str, bytes | None]


@functools.cache
def reference_binary() -> Path | str:
    """The binary's path, or why it cannot be used (the text for pytest.skip)."""
    try:
        import codex_cli_bin  # type: ignore[import-not-found, unused-ignore]

        version = metadata.version("openai-codex-cli-bin")
        path = Path(codex_cli_bin.bundled_codex_path())
    except (ImportError, FileNotFoundError, metadata.PackageNotFoundError):
        return (
            "the reference Codex apply_patch is not installed: "
            f"pip install 'toolroute[parity]' (openai-codex-cli-bin=={REFERENCE_VERSION})"
        )
    if version != REFERENCE_VERSION:
        return f"openai-codex-cli-bin {version} is installed; the parity tests pin {REFERENCE_VERSION}"
    return path


@functools.cache
def _network_namespace() -> tuple[str, ...]:
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, timeout=10, check=False)
    return (unshare, "-rn") if probe.returncode == 0 else ()


@dataclass(frozen=True)
class Reference:
    code: int
    stdout: str
    stderr: str


def run_reference(binary: Path, patch: str, cwd: Path, scratch: Path) -> Reference:
    """Apply `patch` in `cwd` with the reference; `scratch` (outside cwd) is its home."""
    scratch.mkdir(parents=True, exist_ok=True)
    alias = scratch / "apply_patch"  # the binary reads its role from argv[0]'s file name
    with contextlib.suppress(FileExistsError):  # made once; callers may run in parallel
        alias.symlink_to(binary)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "CODEX_HOME": str(scratch), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        [*_network_namespace(), str(alias), patch],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    # Codex names files by their absolute path in errors; the ported texts use relative ones.
    stderr = proc.stderr.decode(errors="replace").replace(f"{cwd}/", "")
    return Reference(proc.returncode, proc.stdout.decode(errors="replace"), stderr)


def write_tree(root: Path, tree: Tree) -> None:
    for rel, data in tree.items():
        path = root / rel
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def read_tree(root: Path) -> Tree:
    out: Tree = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_dir() and not p.is_symlink():
            if not any(p.iterdir()):
                out[rel + "/"] = None
        else:
            out[rel] = p.read_bytes()
    return out
