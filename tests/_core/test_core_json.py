"""Untrusted JSON: every failure is a ValueError naming the file, the size is checked
before reading, and deep nesting does not escape as RecursionError."""

from __future__ import annotations

import json

import pytest

from jaxlab._core import parse_json, read_json


def test_parse_json_reads_what_json_reads():
    text = '{"a": [1, 2.5, "x", null], "b": {"c": true}}'
    assert parse_json(text, where="t") == json.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"a": ', "invalid JSON"),
        (b"\xff\xfe{}", "not UTF-8|invalid JSON"),
    ],
)
def test_parse_json_names_the_source_of_every_failure(text, message):
    with pytest.raises(ValueError, match=f"tasks.json: .*({message})"):
        parse_json(text, where="tasks.json")


def test_read_json_checks_the_size_before_reading(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 1000 + "0]")
    assert len(read_json(path)) == 1001
    with pytest.raises(ValueError, match="big.json: .* bytes of JSON, more than the 100"):
        read_json(path, max_bytes=100)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="deep.json: JSON nested too deeply"):
        read_json(deep)
