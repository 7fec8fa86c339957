"""Streamed text is coalesced into fewer token events, more so while a process streams many answers."""

from __future__ import annotations

import pytest

from supportdesk.pipeline.answer import batching
from supportdesk.pipeline.answer.batching import TokenBatcher, batch_interval_ms


@pytest.mark.parametrize(
    ("streams", "expected"),
    [(1, 150.0), (6, 150.0), (10, 250.0), (20, 500.0), (200, 500.0)],
)
def test_the_interval_grows_with_the_streams_of_the_process_up_to_the_cap(streams, expected):
    assert batch_interval_ms(streams=streams, base_ms=150, per_second=40, max_ms=500) == expected


def test_no_rate_or_a_zero_base_keeps_the_base_interval():
    assert batch_interval_ms(streams=100, base_ms=150, per_second=0, max_ms=500) == 150
    assert batch_interval_ms(streams=100, base_ms=0, per_second=40, max_ms=500) == 0  # one event per chunk


def test_each_open_batcher_counts_as_a_stream_until_it_is_closed():
    before = batching._streams.count
    sent: list[str] = []
    batchers = [TokenBatcher(sent.append, 150, per_second=40, max_ms=500) for _ in range(20)]
    assert batching._streams.count == before + 20
    assert batchers[0].interval_ms() == batch_interval_ms(streams=before + 20, base_ms=150, per_second=40, max_ms=500)
    batchers[0]("held")
    batchers[0]("and more")  # within the interval of the first event: held
    for batcher in batchers:
        batcher.close()
        batcher.close()  # twice: counted down once
    assert batching._streams.count == before
    assert sent == ["held", "and more"]  # close sends what was held


def test_under_load_a_stream_sends_fewer_events(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(batching.time, "monotonic", lambda: clock[0])

    def events(open_streams: int) -> list[str]:
        others = [TokenBatcher(lambda _: None, 150, per_second=40, max_ms=500) for _ in range(open_streams - 1)]
        sent: list[str] = []
        batcher = TokenBatcher(sent.append, 150, per_second=40, max_ms=500)
        for chunk in range(24):  # a chunk about every 50 ms, as the benchmark's model
            clock[0] = chunk * 0.051
            batcher(f"t{chunk} ")
        batcher.close()
        for other in others:
            other.close()
        assert "".join(sent) == "".join(f"t{chunk} " for chunk in range(24))  # nothing lost
        return sent

    alone, loaded = events(1), events(30)
    assert len(alone) == 9  # the first, one every 3 chunks (153 ms), the last two at close
    assert len(loaded) == 4  # the first, one every 10 chunks (510 ms), the last three at close
