"""One table of settings (events/settings.py): the README agrees with it, every module reads
our variables through it, and values are parsed to their type. Plus the one-line error
helper (events/errors.py). Pure tests."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from events.errors import flatten, one_line
from events.settings import SETTINGS, SettingError, setting, spec

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "projections", "actors", "providers", "data", "cli", "bench")


def readme_settings() -> dict[str, dict[str, str]]:
    """The README's configuration table: variable -> its cells."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Configuration and keys", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None if rows else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-: "):
            continue
        if header[0] == "variable":
            row = dict(zip(header, (c.replace("`", "") for c in cells)))
            rows[row["variable"]] = row
    return rows


def test_readme_lists_every_setting_with_its_default():
    rows = readme_settings()
    assert rows, "no configuration table (| variable | flag | type | default | meaning |)"
    assert list(rows) == [s.name for s in SETTINGS]  # same variables, same order
    for s in SETTINGS:
        row = rows[s.name]
        assert row["default"] == s.shown_default, s.name
        assert row["type"] == s.type_name, s.name
        assert row["flag"] == (s.flag or ""), s.name
        assert row["meaning"] == s.meaning.replace("`", ""), s.name


def test_our_variables_are_read_through_the_settings_table():
    """No module reads a TA_ACTORS_* variable (or the vendor key) from os.environ itself."""
    direct = re.compile(r"(os\.environ\.get\s*\(|os\.getenv\s*\(|os\.environ\s*\[)\s*[\"']"
                        r"(TA_ACTORS_\w+|ALPHA_VANTAGE_API_KEY)[\"']\s*[),\]](?!\s*=[^=])")
    offenders = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if path.name == "settings.py" and package == "events":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if direct.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{n}")
    assert offenders == []


def test_every_variable_named_in_code_is_in_the_table():
    names = {s.name for s in SETTINGS}
    used = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            used |= set(re.findall(r"\bTA_ACTORS_[A-Z_]+\b", path.read_text(encoding="utf-8")))
    assert used - names == set()


def test_values_are_parsed_to_their_type(monkeypatch, tmp_path):
    monkeypatch.delenv("TA_ACTORS_MAX_TICKERS", raising=False)
    assert setting("TA_ACTORS_MAX_TICKERS") == 500
    monkeypatch.setenv("TA_ACTORS_MAX_TICKERS", " 12 ")
    assert setting("TA_ACTORS_MAX_TICKERS") == 12
    monkeypatch.setenv("TA_ACTORS_MAX_TICKERS", "many")
    with pytest.raises(SettingError, match="TA_ACTORS_MAX_TICKERS='many' is not a whole number"):
        setting("TA_ACTORS_MAX_TICKERS")
    monkeypatch.setenv("TA_ACTORS_STORE", "~/x.duckdb")
    assert setting("TA_ACTORS_STORE") == Path("~/x.duckdb").expanduser()
    monkeypatch.setenv("TA_ACTORS_STORE", "   ")  # blank counts as unset
    assert setting("TA_ACTORS_STORE").name == "events.duckdb"
    monkeypatch.delenv("TA_ACTORS_OUTPUT_LANGUAGE", raising=False)
    assert setting("TA_ACTORS_OUTPUT_LANGUAGE") == "English"
    assert setting("TA_ACTORS_BASE_URL") is None or isinstance(setting("TA_ACTORS_BASE_URL"), str)
    with pytest.raises(KeyError, match="not in the settings table"):
        setting("TA_ACTORS_NOPE")


def test_table_rows_are_well_formed():
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:
        assert spec(s.name) is s and s.meaning and s.type in (str, int, Path)
        if s.default is not None:
            assert isinstance(s.default, s.type)


def test_cli_defaults_come_from_the_table(monkeypatch):
    from cli.options import build_configs
    monkeypatch.setenv("TA_ACTORS_OUTPUT_LANGUAGE", "Japanese")
    monkeypatch.setenv("TA_ACTORS_QUICK_MODEL", "ollama/llama3.1")
    (config,) = build_configs(["NVDA"], "2024-05-10", "market", 1, 1, False, None, None,
                              None, "synthetic", None)
    assert config.output_language == "Japanese" and config.quick_model == "ollama/llama3.1"
    assert config.deep_model == "offline/deep"


# --- one-line errors -------------------------------------------------------------------------

class _Wrapped(Exception):
    def __init__(self, cause: BaseException):
        super().__init__("ray.exceptions.RayTaskError(ValueError): Traceback ...\n  File x")
        self.cause = cause


def test_one_line():
    assert one_line(ValueError("first\nsecond\nthird")) == "first"
    assert one_line(ValueError("\n\n   spaced    out  \nmore")) == "spaced out"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(_Wrapped(ValueError("the real reason\ntrace"))) == "the real reason"
    assert one_line("x" * 500, limit=10) == "x" * 9 + "…"
    assert one_line("") == ""
    assert flatten("a\n  b\tc") == "a b c"
