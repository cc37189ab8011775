"""Selection's drop step (`preemption/selection.py`) decides as removing each victim and adding it back did.

A victim whose nodes no other victim in the set touches, and none did when it was added, is weighed
by the room it gave when added instead of being removed and added back. On random clusters full of
running gangs (surplus pods inside whole gangs, lone pods, several priorities) and for preemptors of
one or two pod shapes, every domain's selection must be the one the plain remove-and-re-add gives:
the same units, in the same order, and the same room.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import pod, pod_event
from placement.fit import shape_of
from preemption.room import Room
from preemption.selection import Selection, _Tally, select
from preemption.victims import VictimUnit, collect
from tests.property.test_preemption_properties import Scenario, build, scenarios


def _selections(s: Scenario, extra: int, plain: bool) -> list[tuple[str, list[int], list[int]] | None]:
    state = build(s)
    if extra:  # a second shape: one more pending pod of the gang asking for fewer GPUs
        state.apply(pod_event(pod("pre-x", gang="pre", priority=s.priority, gpus=extra), time=200.0))
    pods = [key for key in state.pods if key.startswith("default/pre-")]
    shapes = {shape_of(state.pods[key]).key: shape_of(state.pods[key]) for key in pods}
    order = sorted(shapes)
    need = [sum(1 for key in pods if shape_of(state.pods[key]).key == k) for k in order]
    candidates = collect(state, s.priority, frozenset({"default/pre"}), frozenset(pods))
    room = Room(state, [shapes[k] for k in order], frozenset({"default/pre"}), candidates)
    out: list[tuple[str, list[int], list[int]] | None] = []

    def run() -> None:
        for domain in state.topology.domains:
            found: Selection | None = select(room, domain, candidates.units, need)
            out.append(None if found is None else (domain.name, [u.index for u in found.units], found.slots))

    if plain:
        def never(self: _Tally, unit: VictimUnit) -> None:
            return None

        with mock.patch.object(_Tally, "contribution", never):
            run()
    else:
        run()
    return out


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.sampled_from([0, 0, 2, 4]))
def test_the_drop_step_decides_as_removing_and_re_adding_each_victim(s: Scenario, extra: int) -> None:
    assert _selections(s, extra, plain=False) == _selections(s, extra, plain=True)
