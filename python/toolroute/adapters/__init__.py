"""Framework adapters: OpenAI, Anthropic, OpenAI Agents SDK, LangChain.

Each lives in its own module and imports its framework only when that module is imported;
a missing framework raises ImportError naming the extra to install (`toolroute[openai]`...).
"""

from toolroute.allowlist import CallOutcome, ExposedTools

__all__ = ["CallOutcome", "ExposedTools"]
