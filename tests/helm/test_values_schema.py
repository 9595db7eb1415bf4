"""A wrong value fails at install (values.schema.json), naming what is wrong."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from tests.helm.chart import render

BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "misspelt setting": ({"server": {"maxModelLength": 4096}}, "maxModelLength"),
    "setting of the wrong type": ({"server": {"maxModelLen": "long"}}, "/server/maxModelLen"),
    "setting outside its choices": ({"server": {"logLevel": "loud"}}, "/server/logLevel"),
    "misspelt top-level key": ({"replicas": 2}, "replicas"),
    "replica count as text": ({"replicaCount": "two"}, "/replicaCount"),
    "negative GPU count": ({"gpus": -1}, "/gpus"),
    "relative mount path": ({"modelCache": {"mountPath": "models"}}, "/modelCache/mountPath"),
    "unknown access mode": (
        {"modelCache": {"persistence": {"accessModes": ["ReadWriteSometimes"]}}},
        "/modelCache/persistence/accessModes",
    ),
    "probe without a period": (
        {"probes": {"startup": {"periodSeconds": 0}}},
        "/probes/startup/periodSeconds",
    ),
    "secret without a key": (
        {"secretSettings": {"apiKey": {"name": "keys"}}},
        "/secretSettings/apiKey",
    ),
    "autoscaling with zero replicas": (
        {"autoscaling": {"enabled": True, "minReplicas": 0}},
        "/autoscaling/minReplicas",
    ),
    "metric name Prometheus cannot hold": (
        {"autoscaling": {"waitingRequests": {"metricName": "waiting-requests"}}},
        "/autoscaling/waitingRequests/metricName",
    ),
    "scrape interval without a unit": (
        {"metrics": {"serviceMonitor": {"interval": "30"}}},
        "/metrics/serviceMonitor/interval",
    ),
    "PDB as a fraction": (
        {"podDisruptionBudget": {"maxUnavailable": "50"}},
        "/podDisruptionBudget",
    ),
    "unknown pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
}


@pytest.mark.parametrize(("values", "named"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_wrong_value_rejected(chart: helm_python.Chart, values: dict[str, Any], named: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match="schema") as caught:
        render(chart, values)
    assert named in str(caught.value)


def test_defaults_pass_the_schema(chart: helm_python.Chart) -> None:
    chart.validate_schema(chart.values)
