"""toolroute: the unified tool router between an LLM agent and the tools it may call."""

from toolroute.builtins import BUILTIN_TOOL_NAMES
from toolroute.codemode import CodeMode
from toolroute.context import (
    BuiltInToolContext,
    ToolLimits,
    builtin_tool_context,
    current_builtin_tool_context,
    pop_builtin_tool_context,
    push_builtin_tool_context,
)
from toolroute.default import (
    ainvoke,
    default_router,
    get_all_function_tools,
    get_all_tools,
    get_global_mcp_tools,
    get_user_mcp_tools,
    invoke,
    set_default_router,
)
from toolroute.errors import (
    PathDeniedError,
    PathExistsError,
    PathNotFoundError,
    StaleFileError,
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolPreconditionError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from toolroute.exposure import Exposure
from toolroute.formats import to_anthropic, to_responses
from toolroute.naming import generate_api_function_name
from toolroute.registration import function_tool, mcp_service, mcp_tool
from toolroute.request import ToolRequest
from toolroute.router import ToolRouter
from toolroute.types import Tool, ToolKind, ToolOutput, ToolTraits

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "BuiltInToolContext",
    "CodeMode",
    "Exposure",
    "PathDeniedError",
    "PathExistsError",
    "PathNotFoundError",
    "StaleFileError",
    "Tool",
    "ToolArgumentError",
    "ToolError",
    "ToolExecutionError",
    "ToolKind",
    "ToolLimits",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolPreconditionError",
    "ToolRegistrationError",
    "ToolRequest",
    "ToolRouter",
    "ToolTimeoutError",
    "ToolTraits",
    "ainvoke",
    "builtin_tool_context",
    "current_builtin_tool_context",
    "default_router",
    "function_tool",
    "generate_api_function_name",
    "get_all_function_tools",
    "get_all_tools",
    "get_global_mcp_tools",
    "get_user_mcp_tools",
    "invoke",
    "mcp_service",
    "mcp_tool",
    "pop_builtin_tool_context",
    "push_builtin_tool_context",
    "set_default_router",
    "to_anthropic",
    "to_responses",
]
