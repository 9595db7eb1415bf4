"""Which cores a CPU replica's engines compute on when replicas split a node
(`--ray-cpu-cores per-replica`); pure, no Ray needed.

vLLM's CPU backend pins one OpenMP thread to each core of `VLLM_CPU_OMP_THREADS_BIND`, and
those threads spin between steps: two engines bound to the same cores take them from each
other. Split, the replica of node-local rank r takes its own k cores, as a replica on a
GPU node takes its own device.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from oai_server.settings import Settings


def replica_cores(allowed: Iterable[int], local_rank: int, num_cpus: float) -> list[int]:
    """The cores of the replica of node-local rank `local_rank`: the slice
    [r*k, (r+1)*k) of `allowed` (sorted), k = `num_cpus` rounded down and at least 1.
    More replicas than slices wrap around (rank r takes slice r mod slices); k at least
    the cores allowed gives them all."""
    cores = sorted(set(allowed))
    k = max(1, int(num_cpus))
    if k >= len(cores):
        return cores
    start = (local_rank % (len(cores) // k)) * k
    return cores[start : start + k]


def cpu_list(cores: Sequence[int]) -> str:
    """`cores` as vLLM's core lists write them: runs as ranges, e.g. [0, 1, 2, 5] is '0-2,5'."""
    parts: list[str] = []
    i = 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        parts.append(str(cores[i]) if i == j else f"{cores[i]}-{cores[j]}")
        i = j + 1
    return ",".join(parts)


def own_cores(settings: Settings, local_rank: int, allowed: Iterable[int]) -> Settings:
    """`settings` with the replica's own cores as `cpu_threads_bind` under
    `ray_cpu_cores: per-replica`; as they are under `shared`."""
    if settings.ray_cpu_cores == "shared":
        return settings
    cores = replica_cores(allowed, local_rank, settings.ray_num_cpus)
    return settings.model_copy(update={"cpu_threads_bind": cpu_list(cores)})
