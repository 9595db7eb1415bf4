"""`BatchedHistogram` scrapes as `prometheus_client.Histogram` would, fed the same values."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from oai_server.observability.histogram import BatchedHistogram

BUCKETS = (0.01, 0.05, 0.1, 1.0)
# On a bound (counted in it: `le`), between bounds, above the last, and zero.
VALUES = [0.0, 0.01, 0.02, 0.05, 0.07, 0.1, 0.5, 1.0, 3.0, 0.003]


def _samples(registry: CollectorRegistry) -> set[str]:
    lines = generate_latest(registry).decode().splitlines()
    return {line for line in lines if line and not line.startswith("#") and "_created" not in line}


def test_a_request_tally_scrapes_as_the_same_observations_one_by_one() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("latency_seconds", "doc", registry=theirs, buckets=BUCKETS)
    batched = BatchedHistogram("latency_seconds", "doc", BUCKETS, ours)
    first, second = batched.tally(), batched.tally()
    for i, value in enumerate(VALUES):
        reference.observe(value)
        (first if i % 2 else second).observe(value)
    batched.add(first)
    batched.add(second)
    batched.add(batched.tally())  # a request with no tokens adds nothing
    assert _samples(ours) == _samples(theirs)
    assert 'latency_seconds_bucket{le="0.01"} 3.0' in _samples(ours)


def test_single_observations_of_labelled_series_scrape_as_prometheus_client_does() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("ttft_seconds", "doc", ["model"], registry=theirs, buckets=BUCKETS)
    batched = BatchedHistogram("ttft_seconds", "doc", BUCKETS, ours, ["model"])
    for i, value in enumerate(VALUES):
        model = "a" if i % 3 else "b"
        reference.labels(model).observe(value)
        batched.labels(model).observe(value)
    assert _samples(ours) == _samples(theirs)
    assert 'ttft_seconds_count{model="b"} 4.0' in _samples(ours)
