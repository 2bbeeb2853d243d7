"""Collect benchmark means and print toolroute-vs-pure-Python ratios at the end of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

MEANS: dict[str, float] = {}


def record(benchmark: pytest.FixtureRequest, key: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEANS[key] = stats.stats.mean


@pytest.fixture(scope="module")
def ratio_report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.getplugin("terminalreporter"), plugins.getplugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
        for pair in sorted({k.rsplit(":", 1)[0] for k in MEANS}):
            rust, pure = MEANS.get(f"{pair}:toolroute"), MEANS.get(f"{pair}:pure-python")
            if rust and pure:
                reporter.write_line(
                    f"[files bench] {pair}: toolroute {rust * 1e3:.2f} ms, pure Python {pure * 1e3:.2f} ms "
                    f"(means), pure Python / toolroute = {pure / rust:.1f}x"
                )
