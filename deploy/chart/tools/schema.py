#!/usr/bin/env python3
"""Writes gpustack-operator/values.schema.json: the chart's values, typed and closed, so that Helm
refuses a bad value with its path before it renders anything. Run after changing values.yaml;
with --check it only fails when the committed file differs (the chart test runs that)."""

import json
import sys
import pathlib

MANUFACTURERS = ["amd", "ascend", "cambricon", "hygon", "iluvatar", "metax", "mthreads", "nvidia", "thead"]
APPLICATIONS = ["*", "kueue", "node-feature-discovery", "csi-driver-nfs", "csi-driver-s3", "device-manager", "model-manager"]


def obj(props, required=None, closed=True):
    out = {"type": "object", "properties": props, "additionalProperties": not closed}
    if required:
        out["required"] = required
    return out


STR = {"type": "string"}
BOOL = {"type": "boolean"}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
ANY_OBJ = {"type": "object"}
LIST = {"type": "array"}
ABS_PATH = {"type": "string", "pattern": "^/"}
# Prometheus' durations (a rule's `for`): whole units, no fractions.
ALERT_FOR = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}
# The alerts of files/alerts.yaml, and whether each has a threshold set from the values.
ALERTS = {
    "GpustackMirrorStale": True,
    "GpustackUpstreamErroring": False,
    "GpustackWebhookErrors": False,
    "GpustackWebhookUnreachable": False,
    "GpustackWorkerWithoutLeader": False,
    "GpustackDevicePluginUnregistered": False,
    "GpustackAcceleratorUnhealthy": False,
    "GpustackModelCacheNearHighWatermark": True,
}
DURATION = {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
PULL_POLICY = {"type": "string", "enum": ["", "Always", "IfNotPresent", "Never"]}
RESOURCES = obj({"requests": ANY_OBJ, "limits": ANY_OBJ})
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
SCRAPERS = {"type": "array", "items": {"type": "object"}}

manufacturer_row = {
    "oneOf": [
        {"type": "null"},
        obj(
            {
                "pciVendorID": {"type": "string", "pattern": "^[0-9a-f]{4}$"},
                "resourceName": {"type": "string", "pattern": "^[a-z0-9.-]+/[a-z0-9._-]+$"},
                "hostPaths": {"type": "array", "items": ABS_PATH},
            },
            required=["pciVendorID", "resourceName"],
        ),
    ]
}

schema = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "gpustack-operator chart values",
    **obj(
        {
            "global": obj(
                {
                    "imageRegistry": STR,
                    "imageNamespace": STR,
                    "imageTag": STR,
                    "imagePullPolicy": PULL_POLICY,
                    "imagePullSecrets": {"type": "array", "items": STR},
                    "nodeSelector": STR_MAP,
                    # Named rows only: an unknown manufacturer is refused as an additional property.
                    "manufacturers": obj({m: manufacturer_row for m in MANUFACTURERS}),
                },
                closed=False,
            ),
            "nameOverride": STR,
            "fullnameOverride": STR,
            "namespaceOverride": STR,
            "commonLabels": STR_MAP,
            "image": obj({"repository": {"type": "string", "minLength": 1}, "tag": STR, "pullPolicy": PULL_POLICY}),
            "worker": obj(
                {
                    "enabled": BOOL,
                    "replicas": {"type": "integer", "minimum": 1},
                    "securePort": PORT,
                    "disableApplications": {"type": "array", "items": {"enum": APPLICATIONS}, "uniqueItems": True},
                    "leaderElection": BOOL,
                    "allowAnonymousReviews": BOOL,
                    "podDisruptionBudget": obj({"enabled": BOOL, "minAvailable": {"type": ["integer", "string"]}}),
                    "resources": RESOURCES,
                    "nodeSelector": STR_MAP,
                    "tolerations": LIST,
                    "topologySpreadConstraints": LIST,
                    "affinity": ANY_OBJ,
                    "extraArgs": {"type": "array", "items": STR},
                    "env": STR_MAP,
                    "gateway": obj(
                        {
                            "enabled": BOOL,
                            "link": {"enum": ["unix", "loopback"]},
                            "securePort": PORT,
                            "store": obj(
                                {
                                    "secretName": STR,
                                    "secretKey": {"type": "string", "minLength": 1},
                                }
                            ),
                            "mirrorLeaseDuration": DURATION,
                            "resources": RESOURCES,
                        }
                    ),
                }
            ),
            "deviceManager": obj(
                {
                    "enabled": BOOL,
                    "securePort": PORT,
                    "sliced": BOOL,
                    "partitioned": BOOL,
                    "shared": BOOL,
                    "monitorPeriod": DURATION,
                    "kubeletDir": ABS_PATH,
                    "resources": RESOURCES,
                    "nodeSelector": STR_MAP,
                    "tolerations": LIST,
                    "extraArgs": {"type": "array", "items": STR},
                    "env": STR_MAP,
                    "networkPolicy": obj({"enabled": BOOL, "scrapers": SCRAPERS}),
                }
            ),
            "modelManager": obj(
                {
                    "enabled": BOOL,
                    "securePort": PORT,
                    "kubeletDir": ABS_PATH,
                    "rootPath": ABS_PATH,
                    "resources": RESOURCES,
                    "nodeSelector": STR_MAP,
                    "tolerations": LIST,
                    "extraArgs": {"type": "array", "items": STR},
                    "registrar": obj(
                        {
                            "image": obj({"registry": STR, "repository": {"type": "string", "minLength": 1}, "tag": {"type": "string", "minLength": 1}}),
                            "resources": RESOURCES,
                        }
                    ),
                    "networkPolicy": obj({"enabled": BOOL, "scrapers": SCRAPERS}),
                }
            ),
            "monitoring": obj({
                "serviceMonitors": {"enum": ["auto", True, False, "true", "false"]},
                "interval": DURATION,
                "metricsReaders": {
                    "type": "array",
                    "items": obj(
                        {"name": {"type": "string", "minLength": 1}, "namespace": {"type": "string", "minLength": 1}},
                        required=["name", "namespace"],
                    ),
                },
                "prometheusRules": {"enum": ["auto", True, False, "true", "false"]},
                "alerts": obj(
                    {
                        name: obj({"for": ALERT_FOR, **({"threshold": {"type": "number", "exclusiveMinimum": 0}} if threshold else {})})
                        for name, threshold in ALERTS.items()
                    }
                ),
                "dashboards": obj({
                    "enabled": BOOL,
                    # A label key and value (Kubernetes' syntax) Grafana's sidecar selects on.
                    "label": {"type": "string", "pattern": "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"},
                    "labelValue": {"type": "string", "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", "maxLength": 63},
                }),
            }),
            # The upstream charts' values are theirs to check; only `enabled` is ours.
            **{
                dep: obj({"enabled": BOOL}, closed=False)
                for dep in ["kueue", "node-feature-discovery", "csi-driver-nfs", "csi-driver-s3"]
            },
        }
    ),
}

out = pathlib.Path(__file__).resolve().parent.parent / "gpustack-operator" / "values.schema.json"
text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
if "--check" in sys.argv:
    if out.read_text() != text:
        sys.exit(f"{out} is out of date: run python3 deploy/chart/tools/schema.py")
else:
    out.write_text(text)
