"""The binding's request types are declared once per side and held together: the attributes of
`toolroute.search_options`' protocols are exactly the fields of the Rust structs that read them
(`GrepArgs`, `GlobArgs` in rust/binding/src/search.rs), and the built-ins' request models provide
them (mypy checks the types; this checks a real request through the real binding)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolroute.builtins.glob import GlobRequest
from toolroute.builtins.grep import GrepRequest
from toolroute.search_options import GlobOptions, GrepOptions

BINDING = Path(__file__).resolve().parents[2] / "rust" / "binding" / "src" / "search.rs"


def rust_fields(struct: str) -> list[str]:
    body = re.search(r"struct " + struct + r" \{(.*?)\}", BINDING.read_text(), re.S)
    assert body is not None, struct
    return re.findall(r"^\s*([a-z_]+):", body.group(1), re.M)


def protocol_fields(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if isinstance(value, property)]


@pytest.mark.parametrize(
    ("struct", "protocol", "model"), [("GrepArgs", GrepOptions, GrepRequest), ("GlobArgs", GlobOptions, GlobRequest)]
)
def test_the_protocol_is_the_rust_struct(struct: str, protocol: type, model: type) -> None:
    fields = rust_fields(struct)
    assert fields and protocol_fields(protocol) == fields
    request = model(pattern="x")
    assert all(hasattr(request, name) for name in fields)
