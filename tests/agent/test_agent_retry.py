"""Retries happen only for tools declared idempotent, only for execution failures, with backoff."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from toolroute import ToolArgumentError, ToolRouter, function_tool
from toolroute.agent import AgentToolCall, RetryPolicy, run_tool_calls

FAST = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=0.0)


def flaky_router(tmp_path: Path, fail_times: int) -> ToolRouter:
    """Tools that fail their first `fail_times` calls; each attempt is counted in a real file."""
    router = ToolRouter()

    def attempt(counter: str) -> int:
        path = tmp_path / counter
        n = int(path.read_text()) + 1 if path.exists() else 1
        path.write_text(str(n))
        if n <= fail_times:
            raise OSError(f"transient failure {n}")
        return n

    @function_tool(name="flaky_idempotent", idempotent=True)
    def flaky_idempotent() -> str:
        return f"ok after {attempt('idem')}"

    @function_tool(name="flaky_once_only")
    def flaky_once_only() -> str:
        return f"ok after {attempt('once')}"

    @function_tool(name="picky", idempotent=True)
    def picky() -> str:
        attempt("picky")
        raise ToolArgumentError("the model must change its arguments")

    for tool in (flaky_idempotent, flaky_once_only, picky):
        router.register(tool)
    return router


def attempts_made(tmp_path: Path, counter: str) -> int:
    path = tmp_path / counter
    return int(path.read_text()) if path.exists() else 0


def test_idempotent_tool_is_retried_until_it_succeeds(tmp_path: Path) -> None:
    router = flaky_router(tmp_path, fail_times=2)
    (result,) = run_tool_calls([AgentToolCall("flaky_idempotent")], router, retry=FAST)
    assert not result.is_error
    assert result.output == "ok after 3"
    assert result.attempts == 3
    assert attempts_made(tmp_path, "idem") == 3


def test_tool_not_declared_idempotent_runs_exactly_once(tmp_path: Path) -> None:
    router = flaky_router(tmp_path, fail_times=2)
    (result,) = run_tool_calls([AgentToolCall("flaky_once_only")], router, retry=FAST)
    assert result.is_error and "transient failure 1" in result.output
    assert result.attempts == 1
    assert attempts_made(tmp_path, "once") == 1


def test_retries_stop_at_max_attempts(tmp_path: Path) -> None:
    router = flaky_router(tmp_path, fail_times=10)
    (result,) = run_tool_calls([AgentToolCall("flaky_idempotent")], router, retry=FAST)
    assert result.is_error and "transient failure 3" in result.output
    assert result.attempts == 3
    assert attempts_made(tmp_path, "idem") == 3


def test_argument_errors_are_not_retried(tmp_path: Path) -> None:
    router = flaky_router(tmp_path, fail_times=0)
    (result,) = run_tool_calls([AgentToolCall("picky")], router, retry=FAST)
    assert result.error_type == "ToolArgumentError" and result.attempts == 1
    assert attempts_made(tmp_path, "picky") == 1


def test_a_timed_out_idempotent_call_is_retried(tmp_path: Path) -> None:
    router = ToolRouter()
    first_call_stuck = threading.Event()
    release = threading.Event()

    @function_tool(name="sometimes_stuck", read_only=True, idempotent=True)
    def sometimes_stuck() -> str:
        if not first_call_stuck.is_set():
            first_call_stuck.set()
            release.wait(30)  # stuck until the test ends
            return "late"
        return "prompt"

    router.register(sometimes_stuck)
    try:
        (result,) = run_tool_calls([AgentToolCall("sometimes_stuck")], router, retry=FAST, timeout=0.2)
    finally:
        release.set()
    assert result.output == "prompt" and result.attempts == 2


def test_backoff_schedule_is_exponential_and_capped() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay=0.1, multiplier=2.0, max_delay=0.3, jitter=0.0)
    assert policy.schedule() == pytest.approx([0.1, 0.2, 0.3, 0.3])
    jittery = RetryPolicy(max_attempts=5, initial_delay=1.0, multiplier=2.0, max_delay=10.0, jitter=0.25)
    rng = random.Random(7)
    delays = [jittery.delay(n, rng) for n in (1, 2, 3) for _ in range(50)]
    assert all(0.75 <= d <= 1.25 for d in delays[:50])
    assert all(1.5 <= d <= 2.5 for d in delays[50:100])
    assert len(set(delays)) > 100  # jitter actually spreads the retries


def test_invalid_retry_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(multiplier=0.5)
