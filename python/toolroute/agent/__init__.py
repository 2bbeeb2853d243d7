"""The agent runtime layer (spec 11.1 and 12): executors with structured traces, batches of
tool calls run safely in parallel, approval, retries, capture, JSONL persistence and replay,
and OpenTelemetry spans."""

from toolroute.agent.batch import PlannedCall, ToolCallRunner, arun_tool_calls, as_call, run_tool_calls
from toolroute.agent.capture import IoCapture, IoRecord, ResultSink
from toolroute.agent.executor import (
    READ_ONLY_BUILTINS,
    RouterToolExecutor,
    SchedulingHints,
    ToolExecutor,
    TraceableToolExecutor,
    TraceSlot,
    error_result,
)
from toolroute.agent.persistence import JsonlTraceStore, ReplayExecutor, TraceRecord, load_results, read_trace
from toolroute.agent.policy import (
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    Decision,
    Rule,
    RulePolicy,
    Verdict,
    allow_all,
    allow_tools,
    check_approval,
    deny_all,
    safe_policy,
)
from toolroute.agent.retry import NO_RETRY, RetryPolicy
from toolroute.agent.shell_rule import ShellCommands, allow_shell_commands
from toolroute.agent.telemetry import ToolTelemetry
from toolroute.agent.types import AgentToolCall, AgentToolResult

__all__ = [
    "NO_RETRY",
    "READ_ONLY_BUILTINS",
    "AgentToolCall",
    "AgentToolResult",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "IoCapture",
    "IoRecord",
    "JsonlTraceStore",
    "PlannedCall",
    "ReplayExecutor",
    "ResultSink",
    "RetryPolicy",
    "RouterToolExecutor",
    "Rule",
    "RulePolicy",
    "SchedulingHints",
    "ShellCommands",
    "ToolCallRunner",
    "ToolExecutor",
    "ToolTelemetry",
    "TraceRecord",
    "TraceSlot",
    "TraceableToolExecutor",
    "Verdict",
    "allow_all",
    "allow_shell_commands",
    "allow_tools",
    "arun_tool_calls",
    "as_call",
    "check_approval",
    "deny_all",
    "error_result",
    "load_results",
    "read_trace",
    "run_tool_calls",
    "safe_policy",
]
