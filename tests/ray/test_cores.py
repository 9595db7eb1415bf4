"""`--ray-cpu-cores per-replica`: replicas on one node compute on cores of their own
(docs/operations/ray-serve.md). Here each replica's fake engine says the cores it was
given; that the real engine's threads run on them is read from its threads in
`test_vllm.py`."""

from __future__ import annotations

import os

from oai_server.ray_serve.cores import cpu_list, own_cores, replica_cores
from oai_server.settings import Settings
from tests.conformance import validating_client
from tests.ray.conftest import MODEL, RayServe, deployed, wait_for_replicas

EIGHT = range(8)


def test_each_rank_takes_its_own_slice_of_the_allowed_cores() -> None:
    assert [replica_cores(EIGHT, rank, 2) for rank in range(4)] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
    ]
    # The cores the process may use, whatever their numbers (a cpuset, a container).
    assert [replica_cores({9, 3, 5, 7}, rank, 1) for rank in range(4)] == [[3], [5], [7], [9]]


def test_a_fraction_of_a_cpu_still_gets_a_core_and_more_replicas_than_slices_wrap() -> None:
    assert [replica_cores(range(2), rank, 0.5) for rank in range(4)] == [[0], [1], [0], [1]]
    # Three slices of 2 in 7 cores: the seventh core stays unused, rank 3 shares rank 0's.
    assert replica_cores(range(7), 2, 2) == [4, 5]
    assert replica_cores(range(7), 3, 2) == [0, 1]


def test_a_replica_asking_for_every_core_gets_them_all() -> None:
    assert replica_cores(range(4), 1, 4) == [0, 1, 2, 3]
    assert replica_cores(range(2), 0, 16) == [0, 1]


def test_cores_are_written_as_vllm_reads_them() -> None:
    assert cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_list([3]) == "3"


def test_per_replica_overrides_the_cores_flag_and_shared_keeps_it() -> None:
    split = Settings(ray_cpu_cores="per-replica", ray_num_cpus=2, cpu_threads_bind="0-7")
    assert own_cores(split, 1, EIGHT).cpu_threads_bind == "2-3"
    shared = Settings(cpu_threads_bind="0-7")
    assert own_cores(shared, 1, EIGHT).cpu_threads_bind == "0-7"


def test_two_replicas_on_this_node_compute_on_different_cores(ray_serve: RayServe) -> None:
    settings = {"ray_min_replicas": 2, "ray_max_replicas": 2, "ray_num_cpus": 0.5}
    factory = "tests.ray.engines:fake_naming_its_cores"
    with deployed("cores", engine_factory=factory, ray_cpu_cores="per-replica", **settings):
        wait_for_replicas(ray_serve.url, 2)
        said: dict[str, str] = {}
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Where?"}]}
        with validating_client(timeout=10) as http:
            for _ in range(100):
                answer = http.post(f"{ray_serve.url}/v1/chat/completions", json=body)
                assert answer.status_code == 200, answer.text
                said[answer.headers["x-replica"]] = answer.json()["choices"][0]["message"][
                    "content"
                ]
                if len(said) == 2:
                    break
    allowed = os.sched_getaffinity(0)  # Ray's workers inherit the test process's
    expected = {f"cores {cpu_list(replica_cores(allowed, rank, 0.5))}" for rank in (0, 1)}
    assert set(said.values()) == expected, said
