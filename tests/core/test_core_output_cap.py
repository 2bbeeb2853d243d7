"""One output cap, measured on what the model receives: for every built-in, every text it returns
and every error it raises is at most the context's `max_output_chars` (errors also at most
`MAX_ERROR_CHARS`), whatever the arguments; a cut text ends with the one notice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolroute import BuiltInToolContext, ToolLimits, ToolRouter
from toolroute.builtins import builtin_tools
from toolroute.errors import ToolError
from toolroute.outputcap import CUT_NOTICE, MAX_ERROR_CHARS

LIMITS = (200, 2_000, 30_000)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cap")
    (root / "dir").mkdir()
    for i in range(2_500):
        (root / "dir" / f"entry_{i:05d}_with_a_rather_long_name.txt").write_text(f"needle {i}\n")
    (root / "big.txt").write_text("".join(f"line {i} needle {'x' * (i % 50)}\n" for i in range(60_000)))
    (root / "wide.txt").write_text("y" * 100_000 + "\n")
    (root / "AGENTS.md").write_text("# notes\n")
    return root


@pytest.fixture(scope="module")
def routers(workspace: Path) -> Iterator[dict[int, ToolRouter]]:
    made = {n: ToolRouter(context=BuiltInToolContext(workspace, limits=ToolLimits(max_output_chars=n))) for n in LIMITS}
    yield made
    for router in made.values():
        router.close()


huge = st.integers(1, 120_000).map(lambda n: 'q"\\' * (n // 3))
paths = st.sampled_from(["dir", "big.txt", "wide.txt", "missing.txt", "../outside", "AGENTS.md"]) | huge


def _calls() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    patch_many = "*** Begin Patch\n" + "".join(f"*** Add File: new/f{i}.txt\n+x\n" for i in range(1_500))
    patch_fail = "*** Begin Patch\n*** Update File: big.txt\n@@\n" + "".join(f"-nope {i}\n" for i in range(20_000))
    return st.one_of(
        st.tuples(
            st.just("read_file"), st.fixed_dictionaries({"path": paths}, optional={"max_chars": st.integers(1, 50_000)})
        ),
        st.tuples(st.just("write_file"), st.fixed_dictionaries({"path": paths, "content": huge})),
        st.tuples(st.just("edit"), st.fixed_dictionaries({"path": paths, "old_string": huge, "new_string": huge})),
        st.tuples(st.just("glob"), st.fixed_dictionaries({"pattern": st.sampled_from(["**/*", "dir/*"]) | huge})),
        st.tuples(st.just("grep"), st.fixed_dictionaries({"pattern": st.sampled_from(["needle", "(", "x+"]) | huge})),
        st.tuples(
            st.just("apply_patch"),
            st.sampled_from([patch_many + "*** End Patch\n", patch_fail + "*** End Patch\n"]).map(
                lambda p: {"patch": p}
            )
            | huge.map(lambda p: {"patch": p}),
        ),
        st.tuples(
            st.just("bash"),
            st.one_of(
                huge.map(lambda c: {"command": "echo ok # " + c}),
                st.just({"command": "seq 1 200000"}),
                huge.map(lambda p: {"action": "status", "process_id": p}),
            ),
        ),
        st.tuples(st.just("update_agents_md"), st.fixed_dictionaries({"content": huge})),
    )


COVERED = {"read_file", "write_file", "edit", "apply_patch", "glob", "grep", "bash", "update_agents_md"}


def test_every_builtin_is_covered() -> None:
    assert set(builtin_tools()) == COVERED  # a new built-in needs its calls above


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(call=_calls(), limit=st.sampled_from(LIMITS))
def test_results_and_errors_never_pass_the_cap(
    routers: dict[int, ToolRouter], call: tuple[str, dict[str, Any]], limit: int
) -> None:
    name, arguments = call
    try:
        text = routers[limit].invoke(name, arguments)
    except ToolError as exc:
        message = str(exc)
        assert len(message) <= min(limit, MAX_ERROR_CHARS), (name, len(message))
        return
    assert len(text) <= limit, (name, len(text))
    if name == "bash" and len(text) < limit:
        json.loads(text)  # a fitted result stays JSON
    if len(text) == limit and not text.startswith("{"):
        assert text.endswith(CUT_NOTICE)
