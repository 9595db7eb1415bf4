"""The chart as a user installs it: four kinds of deployment, rendered by Helm's Go SDK,
lint-clean, and every manifest valid for Kubernetes in strict mode (unknown fields fail)."""

from __future__ import annotations

from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest

from oai_server.settings import Settings
from tests.helm.chart import KUBE_VERSION, container, env, one, render
from tests.helm.settings_schema import CHART_DIR

CPU_EMBEDDED: dict[str, Any] = {}
GPU_TENSOR_PARALLEL: dict[str, Any] = {
    "image": {"repository": "registry.example.com/oai-server"},
    "server": {
        "model": "Qwen/Qwen2.5-14B-Instruct",
        "tensorParallelSize": 2,
        "maxModelLen": 32768,
        "gpuMemoryUtilization": 0.92,
    },
    "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "96Gi"}},
    "shmSize": "16Gi",
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "extraEnv": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    ],
}
# The store and the response cache read their URLs from these settings.
DATABASE_URL_SETTING = "storeUrl"
REDIS_URL_SETTING = "responseCache"
REDIS_AND_POSTGRES: dict[str, Any] = {
    "replicaCount": 3,
    "apiKeySecret": "oai-api-keys",
    "secretSettings": {
        DATABASE_URL_SETTING: {"name": "oai-postgres", "key": "url"},
        REDIS_URL_SETTING: {"name": "oai-redis", "key": "url"},
    },
    "modelCache": {
        "mountPath": "/models",
        "persistence": {"enabled": True, "accessModes": ["ReadWriteMany"], "size": "50Gi"},
    },
}
AUTOSCALING: dict[str, Any] = {
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 8},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "modelCache": {"mountPath": "/models", "persistence": {"existingClaim": "shared-models"}},
}
SEVERAL_MODELS: dict[str, Any] = {
    "models": [
        {"name": "qwen", "model": "Qwen/Qwen2.5-1.5B-Instruct", "max_model_len": 8192},
        {"name": "all-minilm-l6-v2", "kind": "embedding"},
    ]
}
VALUE_SETS = {
    "cpu-embedded": CPU_EMBEDDED,
    "several-models": SEVERAL_MODELS,
    "gpu-tensor-parallel": GPU_TENSOR_PARALLEL,
    "redis-and-postgres": REDIS_AND_POSTGRES,
    "autoscaling": AUTOSCALING,
}

# prometheus-operator's ServiceMonitor (monitoring.coreos.com/v1) is a CRD that
# kubernetes-validate has no schema for: the fields the chart writes, as that CRD defines them.
_DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                        },
                    },
                },
            },
        },
    },
}


def validate(manifest: dict[str, Any]) -> None:
    """Kubernetes' own schema (strict: unknown fields fail), or the CRD's for a ServiceMonitor."""
    if manifest["kind"] == "ServiceMonitor":
        jsonschema.validate(manifest, SERVICE_MONITOR_SCHEMA)
    else:
        kubernetes_validate.validate(manifest, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_renders_valid_kubernetes(chart: helm_python.Chart, values: dict[str, Any]) -> None:
    manifests = render(chart, values)
    for manifest in manifests:
        validate(manifest)
    service = one(manifests, "Service")
    selector = one(manifests, "Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_lint_clean(values: dict[str, Any]) -> None:
    report = helm_python.lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSION}.0")
    findings = [m for m in report["messages"] if m["severity"] >= 2]
    assert (findings, report["errors"]) == ([], [])


def test_cpu_default_serves_the_embedded_model(chart: helm_python.Chart) -> None:
    manifests = render(chart, CPU_EMBEDDED)
    server = container(manifests)
    variables = env(manifests)
    assert server["image"] == "oai-server:0.1.0-cpu"
    assert "OAI_MODEL" not in variables
    assert "nvidia.com/gpu" not in server["resources"].get("limits", {})
    assert variables["OAI_HOST"]["value"] == "0.0.0.0"
    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]


def test_every_model_lands_on_the_cache_volume(chart: helm_python.Chart) -> None:
    manifests = render(chart, CPU_EMBEDDED)
    mounts = {m["name"]: m["mountPath"] for m in container(manifests)["volumeMounts"]}
    root = mounts["models"]
    variables = env(manifests)
    for name in ("HF_HOME", "OAI_CACHE_DIR", "VLLM_CACHE_ROOT"):
        assert variables[name]["value"].startswith(root + "/"), name
    volumes = one(manifests, "Deployment")["spec"]["template"]["spec"]["volumes"]
    claim = next(v for v in volumes if v["name"] == "models")["persistentVolumeClaim"]
    assert claim["claimName"] == one(manifests, "PersistentVolumeClaim")["metadata"]["name"]


def test_gpus_follow_tensor_parallelism(chart: helm_python.Chart) -> None:
    manifests = render(chart, GPU_TENSOR_PARALLEL)
    server = container(manifests)
    assert server["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert server["image"] == "registry.example.com/oai-server:0.1.0-cuda"
    assert env(manifests)["OAI_TENSOR_PARALLEL_SIZE"]["value"] == "2"
    assert env(manifests)["OAI_GPU_MEMORY_UTILIZATION"]["value"] == "0.92"


def test_fewer_gpus_than_tensor_parallelism_fails(chart: helm_python.Chart) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=r"less than server\.tensorParallelSize"):
        render(chart, {"gpus": 1, "server": {"tensorParallelSize": 4}})


def test_secrets_feed_the_keys_and_urls(chart: helm_python.Chart) -> None:
    variables = env(render(chart, REDIS_AND_POSTGRES))
    assert variables["OAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "oai-api-keys",
        "key": "api-key",
    }
    assert variables["OAI_STORE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "oai-postgres"
    assert variables["OAI_RESPONSE_CACHE"]["valueFrom"]["secretKeyRef"]["name"] == "oai-redis"


def test_a_setting_given_twice_fails(chart: helm_python.Chart) -> None:
    values = {"apiKeySecret": "keys", "server": {"apiKey": ["in-plain-text"]}}
    with pytest.raises(helm_python.HelmRenderError, match="set it once"):
        render(chart, values)


def test_probes_wait_minutes_for_the_model(chart: helm_python.Chart) -> None:
    server = container(render(chart, CPU_EMBEDDED))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["httpGet"] == {"path": "/health", "port": "http"}
    startup = server["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60
    liveness = server["livenessProbe"]
    # Liveness starts only after startup succeeded, and tolerates a drain's 503s.
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 60


# The chart assumes the server's drain timeout (setting drain_timeout) is 30 s unless
# server.drainTimeout says otherwise; once the setting exists, its default must agree.
_DRAIN_FIELD = Settings.model_fields.get("drain_timeout")
SERVER_DRAIN_DEFAULT = 30 if _DRAIN_FIELD is None else _DRAIN_FIELD.default
DRAIN_CASES: list[tuple[dict[str, Any], int]] = [({}, 5 + SERVER_DRAIN_DEFAULT + 15)]
if _DRAIN_FIELD is not None:
    DRAIN_CASES.append(({"server": {"drainTimeout": 120}}, 5 + 120 + 15))


@pytest.mark.parametrize(("values", "expected"), DRAIN_CASES)
def test_grace_period_outlasts_the_drain(
    chart: helm_python.Chart, values: dict[str, Any], expected: int
) -> None:
    manifests = render(chart, values)
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == expected
    assert container(manifests)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]


def test_grace_period_shorter_than_the_drain_fails(chart: helm_python.Chart) -> None:
    values = {"terminationGracePeriodSeconds": 5 + SERVER_DRAIN_DEFAULT}
    with pytest.raises(helm_python.HelmRenderError, match="must exceed"):
        render(chart, values)


def test_autoscaling_on_waiting_requests_with_cpu_fallback(chart: helm_python.Chart) -> None:
    manifests = render(chart, AUTOSCALING)
    hpa = one(manifests, "HorizontalPodAutoscaler")["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 8)
    assert hpa["scaleTargetRef"]["name"] == one(manifests, "Deployment")["metadata"]["name"]
    pods, cpu = hpa["metrics"]
    assert pods["pods"]["metric"]["name"] == "oai_engine_waiting_requests"
    assert pods["pods"]["target"] == {"type": "AverageValue", "averageValue": "4"}
    assert cpu["resource"]["name"] == "cpu"
    assert "replicas" not in one(manifests, "Deployment")["spec"]
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert not [m for m in manifests if m["kind"] == "PersistentVolumeClaim"]


def test_optional_objects_stay_out_by_default(chart: helm_python.Chart) -> None:
    kinds = sorted(m["kind"] for m in render(chart, CPU_EMBEDDED))
    assert kinds == ["Deployment", "PersistentVolumeClaim", "PodDisruptionBudget", "Service"]
