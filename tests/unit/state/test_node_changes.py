"""A reader's cursor over a change record: what it gets at each call, and when it must start over."""

from __future__ import annotations

import pytest

from state.node_changes import NodeChanges


def test_a_cursor_gets_what_was_noted_since_its_last_call_once() -> None:
    record = NodeChanges()
    record.add("before")
    cursor = record.cursor()
    assert cursor.take() == []  # it starts at the end: what came before is already derived
    record.add("n1")
    record.add("n2")
    record.add("n1")
    assert cursor.take() == ["n1", "n2", "n1"]
    assert cursor.take() == []


def test_a_cursor_left_behind_the_forgotten_names_is_told_to_start_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NodeChanges, "LIMIT", 2)
    record = NodeChanges()
    behind, current = record.cursor(), record.cursor()
    record.add("a")
    record.add("b")
    assert current.take() == ["a", "b"]
    record.add("c")  # past the limit: "a" and "b" are forgotten
    assert behind.take() is None
    assert current.take() == ["c"]
    assert behind.take() == []  # it was moved to the end when told
