"""Framework adapters: OpenAI, Anthropic, OpenAI Agents SDK (and its SandboxAgent), LangChain and
LangGraph, pydantic-ai, Google ADK, LlamaIndex, smolagents.

Every adapter speaks the one contract of `ExposedTools`: a call's `CallOutcome` says its kind
(`OutcomeKind`: ok, bad arguments, not found, refused, approval needed, failed, cancelled), its
text, its structured result and its trace; `ToolMeta` says a tool's side effects and whether it
needs approval. Each adapter maps these to its framework's own idiom.

Each lives in its own module and imports its framework only when that module is imported;
a missing framework raises ImportError naming the extra to install (`toolroute[openai]`...).
"""

from toolroute.allowlist import ApprovalRule, CallOutcome, ExposedTools, OutcomeKind, ToolMeta

__all__ = ["ApprovalRule", "CallOutcome", "ExposedTools", "OutcomeKind", "ToolMeta"]
