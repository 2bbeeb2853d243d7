"""Retries with exponential backoff, only for tools declared idempotent.

Bad arguments, unknown tools and denials are the model's to fix, so only execution failures and
timeouts are retried.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from toolroute.agent.types import AgentToolResult
from toolroute.errors import ToolExecutionError, ToolTimeoutError

RETRYABLE_ERRORS: tuple[str, ...] = (ToolExecutionError.__name__, ToolTimeoutError.__name__)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # 1 disables retries
    initial_delay: float = 0.2  # seconds before the second attempt
    multiplier: float = 2.0
    max_delay: float = 5.0
    jitter: float = 0.1  # +/- this fraction of each delay, so parallel retries spread out
    retry_on: tuple[str, ...] = RETRYABLE_ERRORS

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1 or not 0 <= self.jitter < 1:
            raise ValueError("RetryPolicy: delays must be >= 0, multiplier >= 1 and 0 <= jitter < 1")

    def should_retry(self, result: AgentToolResult, attempt: int) -> bool:
        """After `attempt` attempts ended in `result`, is another one allowed? (idempotency is the
        caller's check: this policy only looks at the failure.)"""
        return result.is_error and result.error_type in self.retry_on and attempt < self.max_attempts

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        if not self.jitter:
            return base
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1 + spread))

    def schedule(self) -> list[float]:
        """The delays between all attempts, without jitter (for logs and tests)."""
        plain = RetryPolicy(self.max_attempts, self.initial_delay, self.multiplier, self.max_delay, 0.0, self.retry_on)
        return [plain.delay(n) for n in range(1, self.max_attempts)]


NO_RETRY = RetryPolicy(max_attempts=1)
