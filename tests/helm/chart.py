"""Render the chart offline with Helm's own Go SDK (helm-python-sdk: no `helm` binary)."""

from __future__ import annotations

from typing import Any

import helm_python
import yaml

RELEASE = "llm"
NAMESPACE = "inference"
# The oldest Kubernetes the chart is checked against (kubernetes-validate's schemas).
KUBE_VERSION = "1.29"


def render(chart: helm_python.Chart, values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest the chart renders for `values` (NOTES.txt left out), parsed."""
    rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    manifests: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        manifests.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return manifests


def one(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The single manifest of `kind`."""
    found = [m for m in manifests if m["kind"] == kind]
    assert len(found) == 1, f"{len(found)} manifests of kind {kind}"
    return found[0]


def container(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """The server's container in the Deployment."""
    containers = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    found: dict[str, Any] = containers[0]
    return found


def env(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The container's environment by name; fails on a name given twice."""
    entries = container(manifests)["env"]
    names = [entry["name"] for entry in entries]
    assert len(names) == len(set(names)), f"duplicate environment variables: {names}"
    return {entry["name"]: entry for entry in entries}
