"""smolagents adapter: an allowlist of router tools as smolagents `Tool`s.

    tools = SmolagentsTools(router, ["read_file", "edit", "bash"], mcp_servers=["docs"])
    agent = ToolCallingAgent(tools=tools.smolagents_tools(), model=model)

smolagents wants each tool name to be a Python identifier (a `CodeAgent` calls tools as
functions); an MCP tool named `word-count` is shown as `word_count`. The mapping is stable (the
same names give the same identifiers, in listing order) and reversible (`exposed_name(...)`);
an identifier already taken gets a numbered suffix, a keyword or a leading digit an underscore.

Each tool's inputs are its JSON schema's properties as they are (types, enums, items, nested
objects, titles; a `$ref` resolved from the schema's `$defs`), an optional one marked
`nullable`. A failure is returned as the observation the model reads (`Error: ...`), not raised:
smolagents runs a step's calls in parallel and one raising would drop the others' results. A
tool with a declared result shape answers with its structured result (a dict a `CodeAgent`
program can index). smolagents has no approval step of its own: a call that needs approval asks
`approve(name, arguments)`, which answers True, False or a reason for refusing; without one the
call is held.

A result with images (an MCP server's, `read_file`'s) shows them as smolagents shows a model a
picture: `step_callbacks=[tools.show_media]` puts them in the step's observation images (PIL
images), and the observation marks each at its place; audio and files, which smolagents' messages
cannot hold, are said in the observation.

With `deferred=` (docs/tool_search.md) the deferred tools are left out and `search_tools` is
listed; pass `step_callbacks=[tools.load_found]` to the agent and what a search finds joins the
agent's tools after that step (a `CodeAgent`'s program can call them too). The found tools are
kept per `SmolagentsTools`: give each agent its own.
"""

from __future__ import annotations

import io
import keyword
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from typing_extensions import Unpack

from toolroute.adapters._content import error_marked, outcome_parts, with_media
from toolroute.adapters._optional import require
from toolroute.allowlist import ExposedTools, Findings, exposed_tools, model_text
from toolroute.blocks import Media, Part, Text, not_carried
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter

require("smolagents", "smolagents", package="smolagents")

import PIL.Image  # noqa: E402  (smolagents depends on Pillow)
from smolagents import Tool  # noqa: E402
from smolagents.tools import AUTHORIZED_TYPES  # noqa: E402

Approver = Callable[[str, Mapping[str, Any]], bool | str]
MAX_REF_DEPTH = 16  # $ref chains resolved at most this deep (a cycle stays a reference)


def identifiers(names: Sequence[str]) -> dict[str, str]:
    """Exposed name -> a Python identifier, stable and distinct, in listing order."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        base = re.sub(r"\W", "_", name, flags=re.ASCII) or "tool"
        if base[0].isdigit() or keyword.iskeyword(base) or keyword.issoftkeyword(base):
            base = f"_{base}" if base[0].isdigit() else f"{base}_"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        out[name] = candidate
    return out


def _resolve(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """`schema` with each local `$ref` replaced by its definition."""
    if depth > MAX_REF_DEPTH:
        return schema
    if isinstance(schema, list):
        return [_resolve(item, defs, depth + 1) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict):
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return _resolve(merged, defs, depth + 1)
    return {k: _resolve(v, defs, depth + 1) for k, v in schema.items()}


def _input_type(prop: Mapping[str, Any]) -> str | list[str]:
    declared = prop.get("type")
    if isinstance(declared, str) and declared in AUTHORIZED_TYPES:
        return declared
    if isinstance(declared, list) and declared and all(t in AUTHORIZED_TYPES for t in declared):
        return list(declared)
    members = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(members, list):
        kinds = [m.get("type") for m in members if isinstance(m, dict)]
        named = [k for k in kinds if isinstance(k, str) and k in AUTHORIZED_TYPES]
        if named and len(named) == len(kinds):
            return named[0] if len(named) == 1 else list(dict.fromkeys(named))
    return "any"


def inputs(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """smolagents `inputs` from a JSON object schema: each property as declared."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    required = set(schema.get("required") or ())
    out: dict[str, dict[str, Any]] = {}
    for name, raw in (schema.get("properties") or {}).items():
        prop = dict(_resolve(raw, defs)) if isinstance(raw, dict) else {}
        kind = _input_type(prop)
        # smolagents' own schema builder reads anyOf members' types; a member without one
        # (a nested object) would break it, so a union it cannot read is left to "any".
        if kind == "any":
            prop.pop("anyOf", None)
            prop.pop("oneOf", None)
        prop["type"] = kind
        prop["description"] = str(prop.get("description") or prop.get("title") or name)
        if name not in required:
            prop["nullable"] = True
        out[name] = prop
    return out


class RouterTool(Tool):
    """One exposed tool as a smolagents tool (its forward runs the router's tool)."""

    skip_forward_signature_validation = True  # forward takes the schema's arguments as **kwargs

    def __init__(
        self,
        tools: ExposedTools,
        exposed: str,
        identifier: str,
        approve: Approver | None = None,
        findings: Findings | None = None,
        media: ShownMedia | None = None,
    ) -> None:
        fn = tools.definition(exposed)
        self.tools = tools
        self.exposed_name = exposed
        self.approve = approve
        self.findings = findings  # told what a search call found
        self.media = media  # the images its results show the model, until the step ends
        self.name = identifier
        self.description = fn.get("description") or exposed
        self.inputs = inputs(fn["parameters"])
        shape = getattr(tools.exposure.tools[exposed], "output_schema", None)
        self.output_type = "object" if isinstance(shape, dict) else "string"
        self.output_schema = shape if isinstance(shape, dict) else None
        super().__init__()  # smolagents then checks the name and inputs (validate_arguments)

    def forward(self, **arguments: Any) -> Any:
        # smolagents passes an omitted optional input as None; the router's schema wants it absent.
        arguments = {k: v for k, v in arguments.items() if v is not None}
        approved = False
        if self.tools.needs_approval(self.exposed_name, arguments):
            verdict = self.approve(self.exposed_name, arguments) if self.approve is not None else None
            if verdict is None:
                return f"Error: {self.exposed_name} needs a person's approval and none was asked (no approver)"
            if verdict is not True:
                why = f": {verdict}" if isinstance(verdict, str) and verdict else ""
                return f"Error: the call of {self.exposed_name} was rejected{why}; it did not run"
            approved = True
        outcome = self.tools.execute(self.exposed_name, arguments, approved=approved)
        if self.findings is not None:
            self.findings.note(self.exposed_name, outcome)
        items = outcome_parts(outcome)
        if with_media(items):
            return self._observation(error_marked(items, outcome))
        if self.output_type == "object" and not outcome.is_error and outcome.structured is not None:
            return outcome.structured
        return model_text(outcome)

    def _observation(self, items: list[Part]) -> str:
        """The text the model reads, each media marked at its place; the images go to the step's
        observation images (`SmolagentsTools.show_media`), smolagents' one way to show a model one."""
        text: list[str] = []
        for part in items:
            if isinstance(part, Text):
                text.append(part.text)
                continue
            image = _image(part) if part.kind == "image" and self.media is not None else None
            if image is None:
                text.append(not_carried(part, SMOLAGENTS_WHY if part.kind != "image" else SMOLAGENTS_WHY_IMAGE).text)
            else:
                assert self.media is not None
                self.media.add(image)
                text.append(f"[{part.label()}: shown to you as an image after this step's observations]")
        return "\n".join(text)


SMOLAGENTS_WHY = "smolagents shows a model images only (its messages have no audio or file kind)"
SMOLAGENTS_WHY_IMAGE = "Pillow cannot decode it for smolagents"


def _image(part: Media) -> PIL.Image.Image | None:
    """The image as smolagents shows one (a PIL image, `ActionStep.observations_images`), or None
    where it does not decode."""
    try:
        image = PIL.Image.open(io.BytesIO(part.raw()))
        image.load()
    except (OSError, ValueError, SyntaxError, PIL.Image.DecompressionBombError):
        return None
    return image


class ShownMedia:
    """The images tool results showed since the step began (a step's calls run in threads)."""

    def __init__(self) -> None:
        self._images: list[PIL.Image.Image] = []
        self._lock = threading.Lock()

    def add(self, image: PIL.Image.Image) -> None:
        with self._lock:
            self._images.append(image)

    def take(self) -> list[PIL.Image.Image]:
        with self._lock:
            taken, self._images = self._images, []
            return taken


class SmolagentsTools:
    """The tools of one allowlist (`ExposedTools`) as smolagents tools."""

    def __init__(
        self,
        router: ToolRouter | ExposedTools,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        approve: Approver | None = None,
        **options: Unpack[RequestOptions],
    ) -> None:
        self.tools = exposed_tools(router, request, *positional, **options)
        self.approve = approve
        # Identifiers for listed and deferred tools alike, so a found tool's never changes.
        self.names = identifiers(self.tools.exposure.names)
        self._exposed = {identifier: name for name, identifier in self.names.items()}
        self.findings = self.tools.findings()  # smolagents runs a step's calls in threads: it locks
        self.media = ShownMedia()

    def exposed_name(self, identifier: str) -> str:
        """The router's name behind a smolagents tool name (KeyError for none)."""
        return self._exposed[identifier]

    def smolagents_tools(self) -> list[Tool]:
        return [self._tool(name) for name in self.tools.names]

    def _tool(self, name: str) -> RouterTool:
        return RouterTool(self.tools, name, self.names[name], self.approve, self.findings, self.media)

    def show_media(self, memory_step: Any, agent: Any) -> None:
        """A step callback: the images this step's tool results held join the step's observation
        images, which the model is shown with the step (`step_callbacks=[tools.show_media]`)."""
        images = self.media.take()
        if images and hasattr(memory_step, "observations_images"):
            memory_step.observations_images = [*(memory_step.observations_images or []), *images]

    def load_found(self, memory_step: Any, agent: Any) -> None:
        """A step callback: give `agent` the deferred tools its searches found in this step."""
        added = False
        for name in self.findings.take():
            if self.names[name] not in agent.tools:
                agent.tools[self.names[name]] = self._tool(name)
                added = True
        executor = getattr(agent, "python_executor", None)
        if added and executor is not None:  # a CodeAgent's program reaches tools through it
            executor.send_tools({**agent.tools, **agent.managed_agents})


# The name before adapters were named alike (`XxxTools`, docs/usage.md); kept for a release.
RouterTools = SmolagentsTools

__all__ = ["RouterTool", "RouterTools", "ShownMedia", "SmolagentsTools", "identifiers", "inputs"]
