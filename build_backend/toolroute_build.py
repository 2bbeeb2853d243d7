"""maturin's PEP 517 backend, behind one check: a source build needs Rust (cargo) >= 1.85.

Without it maturin tries to download rustup, which fails in long tracebacks where the network is
closed; this says what is missing in one message before anything is built.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from typing import Any, NoReturn

import maturin
from maturin import *  # noqa: F403  (the other hooks, such as prepare_metadata_for_build_wheel, as they are)

RUST_MIN = (1, 85)  # the workspace's rust-version (Cargo.toml)
HOW = "install it with rustup (https://rustup.rs) or your system's package manager"


def _require_rust() -> None:
    cargo = shutil.which("cargo")
    if cargo is None:
        _fail(f"no Rust toolchain found (cargo is not on PATH); {HOW}")
    rustc = shutil.which("rustc") or "rustc"  # the compiler's version is what rust-version checks
    try:
        out = subprocess.run([rustc, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        _fail(f"'rustc --version' failed ({exc}); {HOW}")
    found = re.match(r"rustc (\d+)\.(\d+)", out)
    if found and (int(found[1]), int(found[2])) < RUST_MIN:
        _fail(f"{out.strip()} is too old; update it ('rustup update') or install a newer one from https://rustup.rs")


def _fail(message: str) -> NoReturn:
    print(f"\ntoolroute: building from source needs Rust >= {RUST_MIN[0]}.{RUST_MIN[1]}: {message}\n", file=sys.stderr)
    sys.exit(1)


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    _require_rust()
    return list(maturin.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    _require_rust()
    return list(maturin.get_requires_for_build_editable(config_settings))


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    _require_rust()
    return list(maturin.get_requires_for_build_sdist(config_settings))


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    _require_rust()
    return str(maturin.build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    _require_rust()
    return str(maturin.build_editable(wheel_directory, config_settings, metadata_directory))


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    _require_rust()
    return str(maturin.build_sdist(sdist_directory, config_settings))
