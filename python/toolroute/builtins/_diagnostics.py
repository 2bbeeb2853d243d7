"""Running a context's checkers on the files an edit changed (the settings: toolroute/diagnostics.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from toolroute._core import apply_v4a, read_file_head, write_file_bytes
from toolroute.builtins._fileio import display_path
from toolroute.builtins._process import SpawnError, run_command
from toolroute.builtins.bash import context_command
from toolroute.builtins.patch_operation import PatchOperation
from toolroute.context import BuiltInToolContext
from toolroute.diagnostics import Checker, Diagnostics, Finding, first_check_in_batch
from toolroute.errors import PathNotFoundError, ToolPreconditionError
from toolroute.types import ToolOutput

OUTPUT_LIMIT = 64 * 1024  # bytes of a checker's output read (head and tail)


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"[... {len(text) - limit} more characters]"


def _run(ctx: BuiltInToolContext, settings: Diagnostics, checker: Checker, shown: str) -> list[Finding]:
    spec = context_command(ctx, checker.command_for(shown))
    try:
        result = run_command(spec, timeout=settings.timeout, output_limit=OUTPUT_LIMIT)
    except SpawnError as exc:
        return [Finding(shown, checker.label, "warning", f"the checker could not start: {exc}")]
    stdout, stderr = result.render(OUTPUT_LIMIT)
    limit = settings.max_message_chars
    if result.outcome.timed_out:
        return [Finding(shown, checker.label, "warning", f"the checker did not finish within {settings.timeout:g} s")]
    if checker.output == "ruff-json":
        return _ruff_findings(shown, checker, stdout, stderr, limit)
    if result.outcome.exit_code == 0:
        return []
    said = "\n".join(part for part in (stdout.strip(), stderr.strip()) if part)
    said = said or f"exit code {result.outcome.exit_code}"
    return [Finding(shown, checker.label, "error", _cut(said, limit))]


def _ruff_findings(shown: str, checker: Checker, stdout: str, stderr: str, limit: int) -> list[Finding]:
    try:
        items = json.loads(stdout or "[]")
    except json.JSONDecodeError:
        return [Finding(shown, checker.label, "warning", _cut(f"unreadable checker output: {stdout or stderr}", limit))]
    findings = []
    for item in items if isinstance(items, list) else []:
        code = item.get("code")
        where = item.get("location") or {}
        syntax = code is None or code == "invalid-syntax"
        at = f"{shown}:{where.get('row', '?')}:{where.get('column', '?')}"
        message = f"{at}: {code or 'syntax'} {item.get('message', '')}"
        findings.append(Finding(shown, checker.label, "error" if syntax else "warning", _cut(message, limit)))
    return findings


def check(ctx: BuiltInToolContext, changed: Iterable[Path], *, every_time: bool = False) -> list[Finding]:
    """The findings of the context's checkers on `changed` (resolved paths), errors only unless
    the settings ask for warnings; each file once per batch unless `every_time`."""
    settings = ctx.diagnostics
    if settings is None:
        return []
    findings: list[Finding] = []
    for path in changed:
        shown = display_path(ctx, path)
        for checker in settings.checkers:
            if not checker.applies_to(path) or not path.is_file():
                continue
            if not every_time and not first_check_in_batch(checker, path):
                continue
            found = _run(ctx, settings, checker, shown)
            findings += [f for f in found if f.severity == "error" or settings.warnings]
    return findings


def told(findings: list[Finding]) -> str:
    """The findings as appended to a tool's result."""
    if not findings:
        return ""
    lines = [f"\n\nDiagnostics after this change ({len(findings)}):"]
    lines += [f"- [{f.severity}] {f.checker}: {f.message}" for f in findings]
    return "\n".join(lines)


def with_diagnostics(ctx: BuiltInToolContext, output: ToolOutput, changed: Iterable[Path]) -> ToolOutput:
    """`output` with the findings on `changed` appended to its text and given in its trace."""
    if ctx.diagnostics is None:
        return output
    return _attached(output, check(ctx, changed))


def _attached(output: ToolOutput, findings: list[Finding]) -> ToolOutput:
    """`output` with `findings` appended to its text and given in its trace (as it is: none)."""
    if not findings:
        return output
    trace: dict[str, Any] = dict(output.trace) if isinstance(output.trace, dict) else {"result": output.trace}
    trace["diagnostics"] = [f.as_dict() for f in findings]
    return ToolOutput(output.text + told(findings), trace)


def refusing_errors(ctx: BuiltInToolContext, path: str, write: Callable[[], tuple[ToolOutput, Path]]) -> ToolOutput:
    """Run `write` (a change to the one file `path`) and tell the findings; with the setting
    `refuse_errors`, a change that leaves a file with errors it did not have is undone (the file
    put back, or removed if the change made it) and refused."""
    settings = ctx.diagnostics
    if settings is None:
        return write()[0]
    if not settings.refuse_errors:
        output, resolved = write()
        return with_diagnostics(ctx, output, [resolved])
    try:  # toolroute's own look at the file: the stale-read guard does not count it as read
        _, before, _ = read_file_head(ctx.confinement, path, ctx.limits.max_file_bytes, note=False)
    except PathNotFoundError:
        before = None
    target = ctx.resolve(path, write=True)
    had_errors = before is not None and any(f.severity == "error" for f in check(ctx, [target], every_time=True))
    output, resolved = write()
    findings = check(ctx, [resolved], every_time=True)
    errors = [f for f in findings if f.severity == "error"]
    if errors and not had_errors:
        if before is None:
            apply_v4a(ctx.confinement, [PatchOperation(type="delete_file", path=path)], ctx.limits.max_file_bytes)
        else:
            limit = ctx.limits.max_file_bytes
            write_file_bytes(ctx.confinement, path, before, "overwrite", limit, write_read_only=True)
        shown = display_path(ctx, resolved)
        state = "was removed again" if before is None else "is as it was"
        raise ToolPreconditionError(
            f"the change to {shown} was not kept: it leaves the file with errors ({shown} {state}); "
            f"fix them in the change and try again.{told(errors)}"
        )
    return _attached(output, findings)
