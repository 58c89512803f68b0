"""Tool: validation, resource declarations, conflicts and the OpenAI schema."""

from __future__ import annotations

from typing import Any

import pytest

from asynceval.tools import Tool


def noop(**kwargs: Any) -> None:
    return None


def test_a_tool_needs_a_non_empty_name() -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        Tool("", noop)


def test_a_read_only_tool_may_not_declare_writes() -> None:
    with pytest.raises(ValueError, match="read_only but declares writes"):
        Tool("peek", noop, read_only=True, writes=["a"])


def test_fn_must_be_callable() -> None:
    with pytest.raises(TypeError, match="fn must be callable"):
        Tool("x", "not callable")  # type: ignore[arg-type]


def test_resource_names_must_be_non_empty_strings() -> None:
    with pytest.raises(ValueError, match="non-empty strings"):
        Tool("x", noop, reads=[""])


def test_resources_become_frozensets_and_a_single_string_is_one_name() -> None:
    tool = Tool("edit", noop, reads=["a", "b", "a"], writes="file.txt")
    assert tool.reads == frozenset({"a", "b"})
    assert tool.writes == frozenset({"file.txt"})


def test_a_tool_is_frozen() -> None:
    tool = Tool("x", noop)
    with pytest.raises(AttributeError):
        tool.name = "y"  # type: ignore[misc]


def test_only_an_undeclared_writing_tool_is_exclusive() -> None:
    assert Tool("bash", noop).exclusive
    assert not Tool("read", noop, read_only=True).exclusive
    assert not Tool("write", noop, writes=["a"]).exclusive
    assert not Tool("look", noop, reads=["a"]).exclusive


def test_conflicts_follow_the_declared_resources() -> None:
    write_a = Tool("write_a", noop, writes=["a"])
    read_a = Tool("read_a", noop, read_only=True, reads=["a"])
    read_b = Tool("read_b", noop, read_only=True, reads=["b"])
    read_any = Tool("read_any", noop, read_only=True)
    bash = Tool("bash", noop)

    assert write_a.conflicts_with(read_a) and read_a.conflicts_with(write_a)
    assert write_a.conflicts_with(write_a)
    assert not write_a.conflicts_with(read_b)
    assert not read_a.conflicts_with(read_a)
    assert not write_a.conflicts_with(read_any)  # reads nothing anyone writes
    for other in (write_a, read_a, read_b, read_any, bash):
        assert bash.conflicts_with(other) and other.conflicts_with(bash)
    assert write_a.shared_resources(read_a) == {"a"}
    assert write_a.shared_resources(read_b) == frozenset()


def test_openai_schema_defaults_to_an_empty_object() -> None:
    assert Tool("ping", noop).openai_schema() == {
        "type": "function",
        "function": {
            "name": "ping",
            "description": "",
            "parameters": {"type": "object", "properties": {}},
        },
    }


def test_openai_schema_carries_description_and_parameters_as_a_copy() -> None:
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    tool = Tool("read", noop, read_only=True, description="Read a file", parameters=parameters)
    schema = tool.openai_schema()
    assert schema["function"]["description"] == "Read a file"
    assert schema["function"]["parameters"] == parameters
    schema["function"]["parameters"]["required"].append("mode")
    assert parameters["required"] == ["path"]
