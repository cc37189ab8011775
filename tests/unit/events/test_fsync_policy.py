"""Parsing the fsync policy from config files and CLI flags."""

from __future__ import annotations

import pytest

from events.log import EventLogError, FsyncPolicy


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("always", FsyncPolicy("always")),
        ("never", FsyncPolicy("never")),
        ("ALWAYS", FsyncPolicy("always")),
        ("interval:10ms", FsyncPolicy("interval", 10.0)),
        ("10ms", FsyncPolicy("interval", 10.0)),
        (" interval:2.5ms ", FsyncPolicy("interval", 2.5)),
        ("interval:1s", FsyncPolicy("interval", 1000.0)),
        ("0.5s", FsyncPolicy("interval", 500.0)),
    ],
)
def test_fsync_policy_parses_the_documented_spellings(text: str, expected: FsyncPolicy) -> None:
    assert FsyncPolicy.parse(text) == expected


@pytest.mark.parametrize("text", ["", "sometimes", "10", "interval:", "interval:10m", "-5ms", "0ms", "interval:0s"])
def test_a_bad_fsync_policy_is_an_error_naming_the_value(text: str) -> None:
    with pytest.raises(EventLogError, match="invalid fsync policy") as caught:
        FsyncPolicy.parse(text)
    assert repr(text) in str(caught.value)


def test_fsync_policy_prints_as_it_parses() -> None:
    for text in ("always", "never", "interval:10ms", "interval:2.5ms"):
        assert str(FsyncPolicy.parse(text)) == text


def test_an_interval_policy_must_have_a_positive_interval() -> None:
    with pytest.raises(EventLogError, match="must be positive"):
        FsyncPolicy.interval(0)
    with pytest.raises(EventLogError, match="must be positive"):
        FsyncPolicy("interval")
