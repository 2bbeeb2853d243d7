"""The stale-read guard (docs/safe-editing.md, "The stale-read guard"): a rewrite of a file that changed
since this session last read or wrote it is refused, by content, not by modification time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolroute import BuiltInToolContext, StaleFileError, ToolRouter, builtin_tool_context
from toolroute._core import FileSession
from toolroute.agent import ToolCallRunner, allow_all


@pytest.fixture
def space(deployed: Path) -> Path:
    ws = deployed / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\ny = 2\n")
    return ws


def router_for(ws: Path, **options: object) -> Iterator[ToolRouter]:
    ctx = BuiltInToolContext(ws, durability="none", **options)  # type: ignore[arg-type]
    with builtin_tool_context(ctx):
        r = ToolRouter()
        yield r
        r.close()


@pytest.fixture
def r(space: Path) -> Iterator[ToolRouter]:
    yield from router_for(space)


def edit(r: ToolRouter, old: str, new: str, path: str = "a.py") -> str:
    return r.invoke("edit", {"path": path, "old_string": old, "new_string": new})


def test_an_edit_after_another_process_changed_the_file_is_refused_until_read_again(r: ToolRouter, space: Path) -> None:
    r.invoke("read_file", {"path": "a.py"})
    # Another process (the user's editor, a formatter) changes the file.
    subprocess.run([sys.executable, "-c", "open('a.py', 'a').write('z = 3\\n')"], cwd=space, check=True)
    with pytest.raises(StaleFileError, match=r"a.py was not changed: it changed since you last read.*read it again"):
        edit(r, "x = 1", "x = 10")
    assert (space / "a.py").read_text() == "x = 1\ny = 2\nz = 3\n"  # the other change survives
    r.invoke("read_file", {"path": "a.py"})
    edit(r, "x = 1", "x = 10")
    assert (space / "a.py").read_text() == "x = 10\ny = 2\nz = 3\n"


def test_the_same_content_put_back_is_accepted(r: ToolRouter, space: Path) -> None:
    r.invoke("read_file", {"path": "a.py"})
    (space / "a.py").write_text("changed\n")
    (space / "a.py").write_text("x = 1\ny = 2\n")  # back as the session saw it
    edit(r, "y = 2", "y = 20")
    assert (space / "a.py").read_text() == "x = 1\ny = 20\n"


def test_a_changed_modification_time_alone_refuses_nothing(r: ToolRouter, space: Path) -> None:
    r.invoke("read_file", {"path": "a.py", "limit": 1})  # a page: the guard still knows the whole file
    os.utime(space / "a.py", (1, 1))
    subprocess.run(["touch", "a.py"], cwd=space, check=True)
    # A formatter that rewrites the same bytes by rename (a new inode, new times).
    tmp = space / "a.py.new"
    tmp.write_text("x = 1\ny = 2\n")
    os.replace(tmp, space / "a.py")
    edit(r, "x = 1", "x = 2")
    assert (space / "a.py").read_text().startswith("x = 2\n")


def test_the_sessions_own_writes_keep_it_current(r: ToolRouter, space: Path) -> None:
    r.invoke("read_file", {"path": "a.py"})
    edit(r, "x = 1", "x = 5")
    r.invoke("write_file", {"path": "a.py", "content": "w = 0\n", "mode": "append"})
    r.invoke("apply_patch", {"patch": "*** Begin Patch\n*** Update File: a.py\n@@\n-y = 2\n+y = 7\n*** End Patch\n"})
    edit(r, "w = 0", "w = 1")
    assert (space / "a.py").read_text() == "x = 5\ny = 7\nw = 1\n"


@pytest.mark.parametrize(
    "call",
    [
        ("write_file", {"path": "a.py", "content": "gone\n"}),
        ("write_file", {"path": "a.py", "content": "more\n", "mode": "append"}),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 9\n*** End Patch\n"}),
        ("edit", {"path": "a.py", "old_string": "y = 2", "new_string": "y = 9"}),
    ],
    ids=["overwrite", "append", "patch", "edit"],
)
def test_every_rewrite_is_guarded(r: ToolRouter, space: Path, call: tuple[str, dict[str, str]]) -> None:
    r.invoke("read_file", {"path": "a.py"})
    (space / "a.py").write_text("x = 1\ny = 2\nlater = True\n")
    with pytest.raises(StaleFileError):
        r.invoke(*call)
    assert (space / "a.py").read_text() == "x = 1\ny = 2\nlater = True\n"


def test_a_patch_refused_for_one_stale_file_changes_none(r: ToolRouter, space: Path) -> None:
    (space / "b.py").write_text("b = 1\n")
    r.invoke("read_file", {"path": "a.py"})
    r.invoke("read_file", {"path": "b.py"})
    (space / "b.py").write_text("b = 2\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 9\n"
        "*** Update File: b.py\n@@\n-b = 2\n+b = 3\n*** End Patch\n"
    )
    with pytest.raises(StaleFileError, match=r"b\.py"):
        r.invoke("apply_patch", {"patch": patch})
    assert (space / "a.py").read_text() == "x = 1\ny = 2\n"
    assert (space / "b.py").read_text() == "b = 2\n"


def test_a_file_never_read_may_be_rewritten_unless_strict(space: Path) -> None:
    for r in router_for(space):
        edit(r, "x = 1", "x = 3")  # allowed by default
    for r in router_for(space, file_session=FileSession(strict=True)):
        with pytest.raises(StaleFileError, match="you have not read it in this session"):
            edit(r, "x = 3", "x = 4")
        r.invoke("write_file", {"path": "new.py", "content": "n = 1\n", "mode": "create"})  # new files are fine
        edit(r, "n = 1", "n = 2", path="new.py")  # written by the session: known
        r.invoke("read_file", {"path": "a.py"})
        edit(r, "x = 3", "x = 4")
    assert (space / "a.py").read_text() == "x = 4\ny = 2\n"


def test_the_guard_can_be_turned_off(space: Path) -> None:
    for r in router_for(space, guard_stale_reads=False):
        r.invoke("read_file", {"path": "a.py"})
        (space / "a.py").write_text("x = 1\n")
        edit(r, "x = 1", "x = 0")
    assert (space / "a.py").read_text() == "x = 0\n"


def test_a_session_shared_by_two_contexts_of_one_conversation(space: Path) -> None:
    session = FileSession()
    for r in router_for(space, file_session=session):
        r.invoke("read_file", {"path": "a.py"})
    assert session.saw(space.resolve() / "a.py", b"x = 1\ny = 2\n")
    (space / "a.py").write_text("x = 1\ny = 3\n")
    for r in router_for(space, file_session=session):  # a later call of the same conversation
        with pytest.raises(StaleFileError):
            edit(r, "x = 1", "x = 2")


def test_concurrent_lanes_of_one_session_apply_in_order_and_lose_nothing(r: ToolRouter, space: Path) -> None:
    names = [f"v{i}" for i in range(24)]
    (space / "many.txt").write_text("".join(f"{n} = 0\n" for n in names))
    r.invoke("read_file", {"path": "many.txt"})
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            r.invoke("edit", {"path": "many.txt", "old_string": f"{name} = 0", "new_string": f"{name} = 1"})
        except BaseException as exc:  # pragma: no cover - the failure is asserted below
            errors.append(exc)

    from toolroute.context import current_builtin_tool_context

    context = current_builtin_tool_context()
    assert context is not None

    def in_context(name: str) -> None:
        with builtin_tool_context(context):
            one(name)

    threads = [threading.Thread(target=in_context, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert (space / "many.txt").read_text() == "".join(f"{n} = 1\n" for n in names)


def test_a_batchs_parallel_writers_see_each_others_writes(r: ToolRouter, space: Path) -> None:
    (space / "b.txt").write_text("one\n")
    runner = ToolCallRunner(r, max_concurrency=4, policy=allow_all())
    results = runner.run(
        [
            {"name": "read_file", "arguments": {"path": "b.txt"}},
            {"name": "edit", "arguments": {"path": "b.txt", "old_string": "one", "new_string": "two"}},
            {"name": "edit", "arguments": {"path": "b.txt", "old_string": "two", "new_string": "three"}},
            {"name": "write_file", "arguments": {"path": "b.txt", "content": "four\n", "mode": "append"}},
        ]
    )
    assert [res.is_error for res in results] == [False] * 4, [res.output for res in results]
    assert (space / "b.txt").read_text() == "three\nfour\n"


@pytest.mark.parametrize("size", [10_000, 3_000_000], ids=["read-whole", "read-a-page-of-a-large-file"])
def test_a_page_read_records_the_whole_file(r: ToolRouter, space: Path, size: int) -> None:
    body = "".join(f"row {i}\n" for i in range(size // 8))
    (space / "big.txt").write_text(body)
    r.invoke("read_file", {"path": "big.txt", "limit": 5})
    r.invoke("edit", {"path": "big.txt", "old_string": "row 3\n", "new_string": "row three\n"})
    with (space / "big.txt").open("a") as f:  # past the page shown: still a change
        f.write("appended\n")
    with pytest.raises(StaleFileError):
        r.invoke("edit", {"path": "big.txt", "old_string": "row 4\n", "new_string": "row four\n"})


def test_a_page_of_a_large_settled_file_is_remembered_by_its_stamps(r: ToolRouter, space: Path) -> None:
    (space / "log.txt").write_text("".join(f"row {i}\n" for i in range(400_000)))  # about 3.3 MB
    changed = (space / "log.txt").stat().st_ctime_ns // 1_000_000_000
    while int(time.time()) <= changed + 1:  # until settled (a whole second past its last change, by the clock)
        time.sleep(0.05)  # a change now cannot share its stamps
    r.invoke("read_file", {"path": "log.txt", "limit": 5})
    with (space / "log.txt").open("r+") as f:  # the same size, the old modification time put back
        f.seek(100)
        f.write("X")
    os.utime(space / "log.txt", ns=(0, (space / "log.txt").stat().st_mtime_ns))
    with pytest.raises(StaleFileError):
        r.invoke("edit", {"path": "log.txt", "old_string": "row 7\n", "new_string": "row seven\n"})
    r.invoke("read_file", {"path": "log.txt", "limit": 5})  # not settled now: hashed whole
    r.invoke("edit", {"path": "log.txt", "old_string": "row 7\n", "new_string": "row seven\n"})
    assert "row seven\n" in (space / "log.txt").read_text()
