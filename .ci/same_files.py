"""CI's release check: the wheel ships the tree's Python package, file for file and byte for byte.

    python .ci/same_files.py WHEEL python/toolroute

Every file of the package in the wheel (but the compiled `_core.*.so`) must be in the tree with the
same SHA-256, and every file of the tree (but `__pycache__` and a locally built `_core.*.so`) in
the wheel. Exit 1 with the differences listed otherwise.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path, PurePosixPath


def compiled(name: str) -> bool:
    path = PurePosixPath(name)
    return path.name.startswith("_core.") and path.suffix == ".so"


def main(wheel: str, package: str) -> int:
    tree = Path(package)
    top = tree.name + "/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            name.removeprefix(top): hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if name.startswith(top) and not name.endswith("/") and not compiled(name)
        }
    ours = {
        path.relative_to(tree).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in tree.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and not compiled(path.name)
    }
    differing = sorted(name for name in shipped.keys() | ours.keys() if shipped.get(name) != ours.get(name))
    for name in differing:
        print(f"ci: {name}: wheel {shipped.get(name, 'missing')[:12]}, tree {ours.get(name, 'missing')[:12]}")
    if differing:
        print(f"ci: the wheel's {top} differs from {package} in {len(differing)} files")
        return 1
    print(f"ci: {len(ours)} files of {top}, each the same bytes in the wheel as in the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
