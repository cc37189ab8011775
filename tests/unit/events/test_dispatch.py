"""Every consumer of events dispatches through one exhaustive table: no event type is ignored by forgetting it."""

from __future__ import annotations

from typing import get_args

import pytest

import daemon.kube.pod_conditions as pod_conditions
import daemon.kube.topology_status as topology_status
import daemon.offline.explain as explain
import daemon.offline.simulator as simulator
import daemon.offline.verify as verify
import daemon.scheduling.loop as loop
import daemon.telemetry.tracing as tracing
import state.cluster as cluster
from events.dispatch import EVENT_TYPES, each, exhaustive
from events.model import Event, GangPending, NodeUpserted, PodBound


def test_the_event_types_are_the_event_union() -> None:
    assert frozenset(get_args(Event)) == EVENT_TYPES
    assert len(EVENT_TYPES) == len(get_args(Event))


@pytest.mark.parametrize(("consumer", "table"), [
    ("the fold", cluster._HANDLERS),
    ("subject_of", cluster._SUBJECTS),
    ("the loop's observer", loop._OBSERVERS),
    ("the tracing observer", tracing._OBSERVED),
    ("the topology status", topology_status._CHANGES),
    ("the pending pods' conditions", pod_conditions._NOTICED),
    ("the simulation report", simulator._REPORTED),
    ("replay --explain", explain._TOLD),
    ("replay --verify", verify._STARTS),
    ("replay --verify's memory", verify._REMEMBERED),
])
def test_every_consumer_has_an_entry_for_every_event_type(consumer: str, table: dict[type, object]) -> None:
    assert set(table) == EVENT_TYPES, consumer


def test_a_table_that_forgets_an_event_type_is_refused_naming_the_consumer_and_the_type() -> None:
    entries = {**each(tuple(EVENT_TYPES - {GangPending}), None)}
    with pytest.raises(TypeError, match=r"the audit's event table: no entry for GangPending"):
        exhaustive("the audit", entries)


def test_a_table_naming_what_is_not_an_event_is_refused() -> None:
    entries: dict[type, object] = {**each(tuple(EVENT_TYPES), None), int: None}
    with pytest.raises(TypeError, match=r"entries for what is not an event: int"):
        exhaustive("the audit", entries)


def test_the_fold_applies_every_event_type_it_has_a_handler_for() -> None:
    # The decisions kept only for the record are the two the fold has no use for.
    assert {t.__name__ for t, handler in cluster._HANDLERS.items() if handler is None} == {
        "BindRequested", "PreemptionPlanned"}
    assert cluster._HANDLERS[NodeUpserted] is not None and cluster._HANDLERS[PodBound] is not None
