"""An event line assembled from pre-rendered pieces (the fast way) is the line the general
way renders from the whole record, byte for byte, whatever the fields and bound fields; and
anything the fast way cannot render exactly (odd values, secret-looking names or values,
reserved names) still comes out of the general way, redacted as before."""

from __future__ import annotations

import io
import json
import math
import random
from typing import Any

import pytest

from asynceval import _eventlog, events
from asynceval._eventlog import BoundFields, EventLog
from asynceval._jsonfast import encoder, scalar
from asynceval._redact import REDACTED, register_secret


def general_line(level: str, event: str, fields: dict[str, Any], bound: dict[str, Any]) -> str:
    """The general way, called directly: the record, redacted, rendered by `_render_json`."""
    record = {"event": event, "level": level.upper(), "timestamp": "T", **fields}
    for key, value in bound.items():
        record.setdefault(key, value)
    _eventlog.redact_secrets(None, level, record)
    return _eventlog._render_json(level, record)


def fast_line(level: str, event: str, fields: dict[str, Any], bound: dict[str, Any]) -> str | None:
    """The fast way with its timestamp fixed to "T", like `general_line`'s."""
    stamp = _eventlog.timestamp
    _eventlog.timestamp = lambda: "T"  # type: ignore[assignment]
    try:
        return _eventlog._plain_line(level, event, fields, BoundFields({}, bound))
    finally:
        _eventlog.timestamp = stamp  # type: ignore[assignment]


SCALARS: list[Any] = [
    "",
    "plain",
    'quote " and \\ backslash',
    "new\nline\ttab\x00nul",
    "non-ascii é ✓ 𝄞",
    "\ud800 lone surrogate",
    0,
    -7,
    2**70,
    True,
    False,
    None,
    0.0,
    -0.0,
    1.5,
    1e-300,
    1e300,
    0.1 + 0.2,
    math.nan,
    math.inf,
    -math.inf,
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_a_scalar_is_rendered_as_the_standard_encoder_does(value: Any) -> None:
    assert scalar(value) == json.dumps(value)


@pytest.mark.parametrize("value", [[1], {"a": 1}, (1,), b"x", 1 + 2j, object(), True.__class__])
def test_anything_else_is_not_a_scalar(value: Any) -> None:
    assert scalar(value) is None


def test_an_int_or_str_subclass_is_left_to_the_general_way() -> None:
    class Code(int):
        def __repr__(self) -> str:
            return "Code!"

    class Name(str):
        pass

    assert scalar(Code(3)) is None
    assert scalar(Name("x")) is None


def test_the_fast_encoder_gives_the_standard_text_and_errors() -> None:
    for options in ({}, {"ensure_ascii": False, "allow_nan": False}):
        fast = encoder(default=repr, **options)
        slow = json.JSONEncoder(default=repr, **options).encode
        value = {"a": [1, 2.5, None, {"b": "é\n"}], "c": object.__new__(object), 3: "int key"}
        value["c"] = "fixed"  # repr of an object differs run to run; keep the text stable
        assert fast(value) == slow(value)
        assert fast([1, "x"]) == slow([1, "x"])  # not a dict: the standard method itself
    body = {"z": 0, "messages": [{"role": "user", "content": "é"}], "a": {"y": None, "b": 1.5}}
    assert encoder(sort_keys=True)(body) == json.dumps(body, sort_keys=True)  # a call's key
    cycle: dict[str, Any] = {}
    cycle["me"] = cycle
    with pytest.raises(ValueError, match="Circular"):
        encoder(default=repr)(cycle)
    with pytest.raises(ValueError, match="Out of range float"):
        encoder(default=repr, allow_nan=False)({"x": math.nan})


def random_fields(rng: random.Random, names: list[str]) -> dict[str, Any]:
    return {rng.choice(names): rng.choice(SCALARS) for _ in range(rng.randrange(0, 6))}


def test_the_fast_line_is_the_general_line_for_many_shapes() -> None:
    rng = random.Random(14)
    names = ["agent", "call_id", "task_id", "repeat_idx", "wait_s", "x", "ñame", 'q"uote', "run_id"]
    fast_count = 0
    for _ in range(3000):
        fields = random_fields(rng, names)
        bound = random_fields(rng, names)
        level = rng.choice(["debug", "info", "warning", "error"])
        event = rng.choice(["acquired", "my event", "évènement"])
        fast = fast_line(level, event, fields, bound)
        if fast is not None:
            fast_count += 1
            assert fast == general_line(level, event, fields, bound)
    assert fast_count > 2500  # plain shapes do go the fast way


@pytest.mark.parametrize(
    ("fields", "bound"),
    [
        ({"api_key": "abc"}, {}),  # a secret-looking name: blanked by the general way
        ({}, {"authorization": "abc"}),
        ({"x": "Bearer abcdefghijklmnop"}, {}),  # a secret-looking value
        ({"x": [1, 2]}, {}),  # not a scalar
        ({}, {"nested": {"password": "p"}}),
        ({"timestamp": "mine"}, {}),  # a reserved name: it would replace the head's
        ({}, {"level": "mine"}),
        ({"exc_info": False}, {}),
    ],
)
def test_what_the_fast_way_cannot_render_goes_the_general_way(
    fields: dict[str, Any], bound: dict[str, Any]
) -> None:
    assert fast_line("info", "e", fields, bound) is None


def test_registered_secrets_and_redaction_still_hold_through_the_log() -> None:
    out: list[str] = []

    class Collect(io.StringIO):
        def write(self, text: str) -> int:
            out.append(text)
            return len(text)

    log = EventLog(Collect(), "debug", console=False, on_error=lambda exc, lost: None)
    register_secret("hunter2-very-secret")
    log.write("info", "e", {"note": "pw hunter2-very-secret"}, BoundFields({}, {"run_id": "r"}))
    log.write("info", "e", {"token": "x"}, BoundFields({}, {"api_key": "k"}))
    first, second = (json.loads(line) for line in out)
    assert "hunter2-very-secret" not in out[0] and first["run_id"] == "r"
    assert second["api_key"] == REDACTED and second["token"] == "x"


def test_bound_fields_keep_their_order_and_yield_to_the_events_own(
    event_log: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assembled: list[str] = []  # events the log wrote from pre-rendered pieces
    plain_line = _eventlog._plain_line

    def spy(level: str, event: str, fields: Any, bound: Any) -> str | None:
        line = plain_line(level, event, fields, bound)
        if line is not None:
            assembled.append(event)
        return line

    monkeypatch.setattr(_eventlog, "_plain_line", spy)
    with events.bind_context(run_id="r1", task_id="outer"), events.bind_context(repeat_idx=2):
        events.emit("one", task_id="own", n=1)
        with events.bind_context(extra=[1, 2]):  # not a scalar: the general way, same line
            events.emit("two", task_id="own", n=2)
    one, two = (line for line in event_log.lines() if '"one"' in line or '"two"' in line)
    keys = ["event", "level", "timestamp", "task_id", "n", "run_id", "repeat_idx"]
    assert list(json.loads(one)) == keys
    assert list(json.loads(two)) == [*keys, "extra"]
    assert json.loads(one)["task_id"] == "own"
    assert assembled == ["one"]  # "two" (a list bound) went the general way


def test_a_str_subclass_name_does_not_turn_the_plain_name_away() -> None:
    class Name(str):
        pass

    assert fast_line("info", "e", {Name("seen_once_as_subclass"): 1}, {}) is None
    fields = {"seen_once_as_subclass": 1}  # the plain name after it: still the fast way
    assert fast_line("info", "e", fields, {}) == general_line("info", "e", fields, {})


def test_changing_the_dict_bind_context_gave_shows_in_later_events(event_log: Any) -> None:
    with events.bind_context(run_id="r1") as bound:
        events.emit("before")
        bound["run_id"] = "r2"
        bound.update(extra=1)
        events.emit("after")
    before, after = (
        json.loads(line) for line in event_log.lines() if '"before"' in line or '"after"' in line
    )
    assert before["run_id"] == "r1"
    assert (after["run_id"], after["extra"]) == ("r2", 1)


@pytest.mark.parametrize(
    "change",
    [
        lambda bound: bound.__setitem__("run_id", "r2"),
        lambda bound: bound.__delitem__("run_id"),
        lambda bound: bound.__ior__({"run_id": "r2"}),
        lambda bound: bound.update(run_id="r2"),
        lambda bound: bound.setdefault("extra", "x"),
        lambda bound: bound.pop("run_id"),
        lambda bound: bound.popitem(),
        lambda bound: bound.clear(),
    ],
)
def test_every_change_to_the_bound_dict_shows_in_later_lines(
    change: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After any change, a line holds the dict as it is now, not the pieces rendered before."""
    bound = BoundFields({}, {"run_id": "r1", "task_id": "t1"})
    change(bound)
    monkeypatch.setattr(_eventlog, "timestamp", lambda: "T")
    now = general_line("info", "e", {}, dict(bound))
    assert (_eventlog._plain_line("info", "e", {}, bound) or now) == now
    assert bound.rendered is None
