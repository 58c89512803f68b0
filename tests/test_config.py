from __future__ import annotations

from pathlib import Path

import pytest

from asynceval import Settings
from asynceval.errors import ConfigError


def test_defaults_match_the_contract() -> None:
    s = Settings()
    assert (s.max_concurrent_llm_calls, s.retry_initial_delay, s.retry_max_delay) == (5, 1.0, 60.0)
    assert (s.retry_max_attempts, s.batching_enabled, s.llm_call_timeout) == (3, False, 120.0)
    assert (s.max_concurrent_tasks, s.task_timeout, s.max_parallel_tools) == (32, None, 5)
    assert s.llm_requests_per_minute is None and s.llm_tokens_per_minute is None
    assert (s.log_level, s.log_format, s.log_file) == (None, "json", None)  # WARNING on stderr


def test_environment_then_dotenv_then_constructor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("MAX_CONCURRENT_LLM_CALLS=7\nBATCHING_ENABLED=true\n")
    assert Settings().max_concurrent_llm_calls == 7
    assert Settings().batching_enabled is True
    monkeypatch.setenv("MAX_CONCURRENT_LLM_CALLS", "9")
    assert Settings().max_concurrent_llm_calls == 9
    assert Settings(max_concurrent_llm_calls=3).max_concurrent_llm_calls == 3


def test_zero_limit_gives_the_seed_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_LLM_CALLS", "0")
    with pytest.raises(ValueError, match=r"^MAX_CONCURRENT_LLM_CALLS must be >= 1, got 0$"):
        Settings()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_concurrent_llm_calls": -3}, "MAX_CONCURRENT_LLM_CALLS must be >= 1, got -3"),
        ({"max_concurrent_llm_calls": 51}, "MAX_CONCURRENT_LLM_CALLS must be <= 50, got 51"),
        ({"max_concurrent_llm_calls": "abc"}, "MAX_CONCURRENT_LLM_CALLS should be a valid integer"),
        ({"retry_initial_delay": 0}, "RETRY_INITIAL_DELAY must be > 0, got 0"),
        ({"retry_max_delay": 0.5}, "RETRY_MAX_DELAY must be >= RETRY_INITIAL_DELAY (1.0), got 0.5"),
        ({"retry_max_attempts": 0}, "RETRY_MAX_ATTEMPTS must be >= 1, got 0"),
        ({"llm_call_timeout": -1}, "LLM_CALL_TIMEOUT must be > 0, got -1"),
        ({"task_timeout": 0}, "TASK_TIMEOUT must be > 0, got 0"),
        ({"llm_requests_per_minute": 0}, "LLM_REQUESTS_PER_MINUTE must be >= 1, got 0"),
        ({"batching_enabled": "maybe"}, "BATCHING_ENABLED should be a valid boolean"),
        ({"log_format": "xml"}, "LOG_FORMAT should be 'json' or 'console', got 'xml'"),
        ({"llm_http_transport": "curl"}, "LLM_HTTP_TRANSPORT should be 'aiohttp' or 'httpx'"),
    ],
)
def test_bad_values_name_the_variable_and_value(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings(**overrides)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_env_value_is_reported_under_its_env_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_CALL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"LLM_CALL_TIMEOUT should be a valid number.*'soon'"):
        Settings()


def test_empty_optional_values_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_REQUESTS_PER_MINUTE", "")
    monkeypatch.setenv("TASK_TIMEOUT", "")
    s = Settings()
    assert s.llm_requests_per_minute is None and s.task_timeout is None


def test_public_view_never_holds_the_api_key() -> None:
    s = Settings(llm_api_key="sk-very-secret-key-123")
    assert "sk-very-secret-key-123" not in repr(s)
    assert "sk-very-secret-key-123" not in str(s.public())
    assert s.public()["llm_api_key_set"] is True


def test_env_example_documents_every_setting() -> None:
    example = (Path(__file__).parents[1] / ".env.example").read_text()
    for name in Settings.model_fields:
        assert f"{name.upper()}=" in example, name


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_cache_folder_is_no_cache(value: str) -> None:
    assert Settings(llm_cache_dir=value).llm_cache_dir is None


def test_a_cache_folder_is_absolute_and_never_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings(llm_cache_dir="cache").llm_cache_dir == str(tmp_path / "cache")
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(ConfigError, match="LLM_CACHE_DIR must be a folder"):
        Settings(llm_cache_dir="taken")


@pytest.mark.parametrize("name", ["max_concurrent_llm_calls", "llm_base_url", "llm_http_transport"])
def test_a_key_given_to_the_wrong_setting_is_not_echoed_in_the_error(name: str) -> None:
    """The error names the setting and says what is wrong, without the key (stderr goes to CI
    logs)."""
    key = "sk-proj-abcdefghijklmnopqrstuvwx0123456789"
    with pytest.raises(ConfigError) as caught:
        Settings(**{name: key})
    assert name.upper() in str(caught.value)
    assert key not in str(caught.value) and "abcdefghijklmnop" not in str(caught.value)
