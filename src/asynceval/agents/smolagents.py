"""smolagents on asynceval: `AsyncEvalModel`, a smolagents `Model` backed by an asynceval model.

Needs the optional extra: `pip install 'asynceval[smolagents]'`. smolagents agents are sync, so run
one inside a Benchmark as `SyncAgent(agent)`: its `run` goes to an engine worker thread and every
model call it makes goes through `ChatModel.generate_sync`, i.e. the run's global concurrency
limit, rate limiter, retries and acquired/released events, and is counted in the report's usage.

    model = AsyncEvalModel(OpenAIChatModel(settings=self.settings))
    agent = ToolCallingAgent(tools=[my_tool], model=model, verbosity_level=LogLevel.OFF)
    return [SyncAgent(agent, name="smol")], {...}

The requests are the ones smolagents' own `OpenAIModel` sends (its message cleaning, role
conversions and `get_tool_json_schema`; `tool_choice="required"` when tools are offered; `stop`),
so the adapter is meant for OpenAI-compatible models (`OpenAIChatModel`): an `AnthropicChatModel`
would get OpenAI's `tool_choice` and `stop` values as they are.

Limits: smolagents runs several tool calls of one step in its own thread pool, where
`generate_sync` cannot reach the event loop, so a tool or managed agent that calls a model must
not be called in parallel with others (`parallel_tool_calls=False`, or one tool call per step).
Agents with `stream_outputs=True` refuse this model (it has no `generate_stream`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
        remove_content_after_stop_sequences,
    )
    from smolagents.monitoring import TokenUsage
except ImportError as exc:
    raise ImportError(
        "asynceval.agents.smolagents needs the smolagents package: "
        f"pip install 'asynceval[smolagents]' ({exc})"
    ) from exc

from ..llm.model import ChatModel
from ..llm.types import Completion, ToolCall

__all__ = ["AsyncEvalModel", "to_chat_message"]

_TOOLS_ONLY = ("tool_choice", "parallel_tool_calls")  # parameters a request without tools refuses


class AsyncEvalModel(Model):  # type: ignore[misc]
    """A smolagents `Model` whose calls go through `chat_model.generate_sync` (sync code only).

    `agent` and `dimension` label the calls' events; None takes the values bound around the call
    (`SyncAgent` binds its name as `agent`). A call may override them with `agent=` /
    `dimension=` keyword arguments. Other keyword arguments (e.g. `temperature`,
    `parallel_tool_calls=False`) go into every request body, as with smolagents' models;
    `tool_choice` and `parallel_tool_calls` are dropped from requests that offer no tools (an
    agent's final-answer call after max_steps), which OpenAI would refuse.

    `generate` must run in a worker thread started by anyio (the engine's, for an agent wrapped
    in `SyncAgent`); on the event loop thread it raises RuntimeError. A call that fails for good
    raises `LLMCallFailed` (smolagents agents wrap it in `AgentGenerationError`, with the
    `LLMCallFailed` as its cause, so the engine still sees an LLM failure).
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        custom_role_conversions: Mapping[str, str] | None = None,
        flatten_messages_as_text: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            flatten_messages_as_text=flatten_messages_as_text,
            model_id=chat_model.model,
            **kwargs,
        )
        self.chat_model = chat_model
        self.agent = agent
        self.dimension = dimension
        self.custom_role_conversions = (
            dict(custom_role_conversions) if custom_role_conversions else None
        )

    def generate(
        self,
        messages: Sequence[Any],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, Any] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """One completion for smolagents `messages` (ChatMessages or dicts, content as a string
        or a list of parts), as a smolagents assistant `ChatMessage` with tool calls and usage."""
        agent = kwargs.pop("agent", self.agent)
        dimension = kwargs.pop("dimension", self.dimension)
        request = self._prepare_completion_kwargs(
            messages=[_with_part_list(message) for message in messages],
            stop_sequences=stop_sequences,
            response_format=response_format,
            tools_to_call_from=tools_to_call_from,
            custom_role_conversions=self.custom_role_conversions,
            convert_images_to_image_urls=True,
            **kwargs,
        )
        wire_messages = [_wire_message(message) for message in request.pop("messages")]
        request_format = request.pop("response_format", None)
        request.pop("model", None)  # the ChatModel names its own model
        if not request.get("tools"):
            for name in _TOOLS_ONLY:
                request.pop(name, None)
        completion = self.chat_model.generate_sync(
            wire_messages,
            agent=agent,
            dimension=dimension,
            response_format=request_format,
            **request,
        )
        message = to_chat_message(completion)
        if stop_sequences and not self.supports_stop_parameter:
            message.content = remove_content_after_stop_sequences(message.content, stop_sequences)
        return message


def to_chat_message(completion: Completion) -> Any:
    """A smolagents assistant `ChatMessage` from an asynceval `Completion`.

    Tool calls keep the provider's id and name; their arguments are the parsed JSON (which may be
    a non-object, such as a string, for a single-input tool) or, if the provider sent text that is
    not JSON, that text as it is, which smolagents passes to the tool as one argument. Content is
    None for a reply made only of tool calls, as OpenAI sends it.
    """
    tool_calls = [
        ChatMessageToolCall(
            id=call.id,
            type="function",
            function=ChatMessageToolCallFunction(name=call.name, arguments=_arguments(call)),
        )
        for call in completion.tool_calls
    ]
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content=completion.text if completion.text or not tool_calls else None,
        tool_calls=tool_calls or None,
        raw=completion.raw,
        token_usage=TokenUsage(
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
        ),
    )


def _arguments(call: ToolCall) -> Any:
    if not call.raw_arguments:
        return dict(call.arguments)
    try:
        return json.loads(call.raw_arguments)
    except ValueError:
        return call.raw_arguments


def _with_part_list(message: Any) -> Any:
    """`message` with string or null content as a list of text parts, the only content shape
    smolagents' message cleaning can merge; anything else is left to smolagents."""
    if isinstance(message, ChatMessage):
        content = message.content
        if content is None or isinstance(content, str):
            return ChatMessage(
                role=message.role,
                content=_parts(content),
                tool_calls=message.tool_calls,
                raw=message.raw,
                token_usage=message.token_usage,
            )
        return message
    if isinstance(message, Mapping):
        content = message.get("content")
        if content is None or isinstance(content, str):
            return {**message, "content": _parts(content)}
    return message


def _parts(text: str | None) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text or ""}]


def _wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message dict: the role as its plain string, "" for empty content."""
    role = message["role"]
    content = message.get("content")
    return {
        "role": role.value if isinstance(role, MessageRole) else str(role),
        "content": content or "",
    }
