"""Names in the environment and `.env` that look like settings but are none, and values a
setting refuses before anything runs (the CLI's side is in tests/cli/test_edges.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from asynceval import Settings
from asynceval.config import UnknownSettingWarning
from asynceval.errors import ConfigError


def _unknown_names(**env_file: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Settings(**env_file)
    return [str(w.message) for w in caught if issubclass(w.category, UnknownSettingWarning)]


def test_a_misspelt_name_in_dotenv_warns_naming_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "MAX_CONCURENT_LLM_CALLS=1\nexport LLM_MODLE=m\nLLM_PROVIDER_REGION=eu\nretry_max_attempt=2\n"
        "HOME_DIR=/x\nOPENAI_API_KEY=sk-x\nMAX_CONCURRENT_TASKS=3\n"
    )
    assert _unknown_names() == [
        "MAX_CONCURENT_LLM_CALLS in .env line 1 is not an asynceval setting; "
        "did you mean MAX_CONCURRENT_LLM_CALLS?",
        "LLM_MODLE in .env line 2 is not an asynceval setting; did you mean LLM_MODEL?",
        "LLM_PROVIDER_REGION in .env line 3 is not an asynceval setting",  # ours, none close
        "retry_max_attempt in .env line 4 is not an asynceval setting; "
        "did you mean RETRY_MAX_ATTEMPTS?",  # no prefix (lower case), one edit away
    ]
    assert _unknown_names(_env_file=None) == []  # the names of the files that are read


def test_a_name_two_edits_from_a_setting_warns_whatever_its_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOGFILE", "x")
    monkeypatch.setenv("MAXPARALLEL_TOOL", "3")
    monkeypatch.setenv("DATABASE_URL", "x")  # nothing like ours: none
    assert [m for m in _unknown_names(_env_file=None) if "DATABASE" in m] == []
    assert "LOGFILE is not an asynceval setting; did you mean LOG_FILE?" in _unknown_names()
    assert (
        "MAXPARALLEL_TOOL is not an asynceval setting; did you mean MAX_PARALLEL_TOOLS?"
    ) in _unknown_names()


def test_each_unknown_name_is_warned_once_per_process_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAX_CONCURENT_LLM_CALLS", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        Settings()
        Settings()
    assert len([w for w in caught if issubclass(w.category, UnknownSettingWarning)]) == 1


def test_a_dotenv_that_is_not_utf8_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_bytes("LLM_API_KEY=sk-caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"^\.env: not UTF-8 text \(") as raised:
        Settings()
    assert "sk-caf" not in str(raised.value)


@pytest.mark.parametrize(
    "url", ["https://host/v1?key=sk-secret", "https://host/v1#sk-secret", "https://host/v1?"]
)
def test_a_base_url_with_a_query_or_fragment_is_refused_without_repeating_it(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^LLM_BASE_URL must have no query string") as raised:
        Settings(llm_base_url=url)
    assert "sk-secret" not in str(raised.value) and "https://host/v1," in str(raised.value)
