"""Code mode: one tool whose input is a program that calls the request's tools through the router
(docs/code_mode.md)."""

from toolroute.codemode.inner import INNER_CALLS, InnerCaller, InnerReply, inner_calls_through, not_callable
from toolroute.codemode.tool import DEFAULT_NAME, CodeMode, RunCodeRequest, code_tool, is_code_tool

__all__ = [
    "DEFAULT_NAME",
    "INNER_CALLS",
    "CodeMode",
    "InnerCaller",
    "InnerReply",
    "RunCodeRequest",
    "code_tool",
    "inner_calls_through",
    "is_code_tool",
    "not_callable",
]
