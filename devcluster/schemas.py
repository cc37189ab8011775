"""OpenAPI v3 schemas of the served kinds, written as plain JSON-schema dicts.

These schemas serve three readers: the OpenAPI v3 documents (kubectl reads them to decide that the
server validates, and to compute strategic merge patches), the server-side strict field validation
(`validation.py`: an unknown field is one not declared here), and the strategic merge patch
(`patches.py`: list merge keys come from `x-kubernetes-patch-merge-key`).

Built-in kinds declare the fields real manifests use, one level deep where schedulers and workloads
write them; deeper, rarely-scheduled subtrees (probes, security contexts, volume sources, ...) carry
`x-kubernetes-preserve-unknown-fields` so that a legitimate manifest is never refused for a field we
did not spell out. The custom resources declare the fields toposched reads, as their CRDs do.

Pure data: no I/O.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def child_schema(schema: Schema | None, key: str) -> Schema | None:
    """The schema of field `key` of an object (None where unknown, or inside a preserve-unknown-fields subtree)."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return None
    properties = schema.get("properties")
    if properties is not None:
        found: Schema | None = properties.get(key)
        return found
    additional: Schema | None = schema.get("additionalProperties")
    return additional


def _string(description: str = "") -> Schema:
    return {"type": "string", "description": description} if description else {"type": "string"}


def _integer() -> Schema:
    return {"type": "integer", "format": "int64"}


def _boolean() -> Schema:
    return {"type": "boolean"}


def _time() -> Schema:
    return {"type": "string", "format": "date-time"}


def _quantity() -> Schema:
    """A built-in kind's `resource.Quantity`: a string, or a JSON number (the server stores it canonical)."""
    return {"type": "string", "format": "quantity"}


def _int_or_string() -> Schema:
    """IntOrString, and a custom resource's quantity (its CRD says int-or-string: floats are refused)."""
    return {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}


def _object(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _map(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


def _array(items: Schema, merge_key: str = "", strategy: str = "") -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if merge_key:
        schema["x-kubernetes-patch-merge-key"] = merge_key
        schema["x-kubernetes-patch-strategy"] = strategy or "merge"
    elif strategy:
        schema["x-kubernetes-patch-strategy"] = strategy
    return schema


def _free() -> Schema:
    """A subtree accepted as written (not validated field by field)."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _free_array() -> Schema:
    return {"type": "array", "items": _free()}


def _strings() -> Schema:
    return _array(_string())


def _quantities() -> Schema:
    return _map(_quantity())


def _cr_quantities() -> Schema:
    return _map(_int_or_string())


_OWNER_REFERENCE = _object({
    "apiVersion": _string(), "kind": _string(), "name": _string(), "uid": _string(),
    "controller": _boolean(), "blockOwnerDeletion": _boolean(),
})

OBJECT_META: Schema = _object({
    "name": _string(), "generateName": _string(), "namespace": _string(), "selfLink": _string(), "uid": _string(),
    "resourceVersion": _string(), "generation": _integer(), "creationTimestamp": _time(),
    "deletionTimestamp": _time(), "deletionGracePeriodSeconds": _integer(),
    "labels": _map(_string()), "annotations": _map(_string()),
    "ownerReferences": _array(_OWNER_REFERENCE, "uid"), "finalizers": _array(_string(), strategy="merge"),
    "managedFields": _free_array(),
})

LIST_META: Schema = _object({
    "resourceVersion": _string(), "continue": _string(), "remainingItemCount": _integer(), "selfLink": _string(),
})

_LABEL_SELECTOR_REQUIREMENT = _object({"key": _string(), "operator": _string(), "values": _strings()},
                                      ("key", "operator"))
LABEL_SELECTOR: Schema = _object({
    "matchLabels": _map(_string()), "matchExpressions": _array(_LABEL_SELECTOR_REQUIREMENT),
})

_CONDITION = _object({
    "type": _string(), "status": _string(), "observedGeneration": _integer(), "lastProbeTime": _time(),
    "lastHeartbeatTime": _time(), "lastTransitionTime": _time(), "reason": _string(), "message": _string(),
})

_RESOURCES = _object({"requests": _quantities(), "limits": _quantities(), "claims": _free_array()})

_CONTAINER = _object({
    "name": _string(), "image": _string(), "imagePullPolicy": _string(),
    "command": _strings(), "args": _strings(), "workingDir": _string(),
    "env": _array(_free(), "name"), "envFrom": _free_array(),
    "ports": _array(_object({
        "name": _string(), "containerPort": _integer(), "hostPort": _integer(), "hostIP": _string(),
        "protocol": _string(),
    }), "containerPort"),
    "resources": _RESOURCES, "resizePolicy": _free_array(), "restartPolicy": _string(),
    "restartPolicyRules": _free_array(),
    "volumeMounts": _array(_free(), "mountPath"), "volumeDevices": _array(_free(), "devicePath"),
    "livenessProbe": _free(), "readinessProbe": _free(), "startupProbe": _free(), "lifecycle": _free(),
    "terminationMessagePath": _string(), "terminationMessagePolicy": _string(), "securityContext": _free(),
    "stdin": _boolean(), "stdinOnce": _boolean(), "tty": _boolean(),
}, ("name",))

_TOLERATION = _object({
    "key": _string(), "operator": _string(), "value": _string(), "effect": _string(), "tolerationSeconds": _integer(),
})

_NODE_SELECTOR_REQUIREMENT = _object({"key": _string(), "operator": _string(), "values": _strings()},
                                     ("key", "operator"))
_NODE_SELECTOR_TERM = _object({
    "matchExpressions": _array(_NODE_SELECTOR_REQUIREMENT), "matchFields": _array(_NODE_SELECTOR_REQUIREMENT),
})
_NODE_AFFINITY = _object({
    "requiredDuringSchedulingIgnoredDuringExecution": _object({"nodeSelectorTerms": _array(_NODE_SELECTOR_TERM)}),
    "preferredDuringSchedulingIgnoredDuringExecution": _array(_object({
        "weight": _integer(), "preference": _NODE_SELECTOR_TERM,
    })),
})

POD_SPEC: Schema = _object({
    "containers": _array(_CONTAINER, "name"), "initContainers": _array(_CONTAINER, "name"),
    "ephemeralContainers": _array(_free(), "name"),
    "nodeName": _string(), "nodeSelector": _map(_string()), "schedulerName": _string(),
    "priority": _integer(), "priorityClassName": _string(), "preemptionPolicy": _string(),
    "affinity": _object({"nodeAffinity": _NODE_AFFINITY, "podAffinity": _free(), "podAntiAffinity": _free()}),
    "tolerations": _array(_TOLERATION), "topologySpreadConstraints": _array(_free(), "topologyKey"),
    "schedulingGates": _array(_object({"name": _string()}), "name"),
    "terminationGracePeriodSeconds": _integer(), "activeDeadlineSeconds": _integer(),
    "restartPolicy": _string(), "dnsPolicy": _string(), "dnsConfig": _free(),
    "serviceAccountName": _string(), "serviceAccount": _string(), "automountServiceAccountToken": _boolean(),
    "volumes": _array(_free(), "name"), "imagePullSecrets": _array(_object({"name": _string()}), "name"),
    "hostNetwork": _boolean(), "hostPID": _boolean(), "hostIPC": _boolean(), "hostUsers": _boolean(),
    "shareProcessNamespace": _boolean(), "hostname": _string(), "subdomain": _string(),
    "setHostnameAsFQDN": _boolean(), "hostAliases": _free_array(), "securityContext": _free(),
    "runtimeClassName": _string(), "overhead": _quantities(), "enableServiceLinks": _boolean(),
    "readinessGates": _free_array(), "os": _object({"name": _string()}), "resourceClaims": _free_array(),
    "resources": _RESOURCES, "hostnameOverride": _string(),
    # The Workload API's pod side: 1.35 joins a Workload's pod group, 1.36 a runtime PodGroup by name.
    "workloadRef": _object({"name": _string(), "podGroup": _string(), "podGroupReplicaKey": _string()}),
    "schedulingGroup": _object({"podGroupName": _string()}),
}, ("containers",))

POD_STATUS: Schema = _object({
    "phase": _string(), "conditions": _array(_CONDITION, "type"), "message": _string(), "reason": _string(),
    "nominatedNodeName": _string(), "hostIP": _string(), "hostIPs": _free_array(), "podIP": _string(),
    "podIPs": _array(_object({"ip": _string()}), "ip"), "startTime": _time(), "qosClass": _string(),
    "containerStatuses": _free_array(), "initContainerStatuses": _free_array(),
    "ephemeralContainerStatuses": _free_array(), "resize": _string(), "resourceClaimStatuses": _free_array(),
    "observedGeneration": _integer(), "allocatedResources": _quantities(), "resources": _free(),
    "extendedResourceClaimStatus": _free(), "nodeAllocatableResourceClaimStatuses": _free_array(),
})

_NODE_SPEC = _object({
    "podCIDR": _string(), "podCIDRs": _strings(), "providerID": _string(), "unschedulable": _boolean(),
    "taints": _array(_object({"key": _string(), "value": _string(), "effect": _string(), "timeAdded": _time()},
                             ("key", "effect"))),
    "configSource": _free(), "externalID": _string(),
})
_NODE_STATUS = _object({
    "capacity": _quantities(), "allocatable": _quantities(), "phase": _string(),
    "conditions": _array(_CONDITION, "type"),
    "addresses": _array(_object({"type": _string(), "address": _string()}), "type"),
    "daemonEndpoints": _free(), "nodeInfo": _free(), "images": _free_array(), "volumesInUse": _strings(),
    "volumesAttached": _free_array(), "config": _free(), "runtimeHandlers": _free_array(), "features": _free(),
})

_OBJECT_REFERENCE = _object({
    "kind": _string(), "namespace": _string(), "name": _string(), "uid": _string(), "apiVersion": _string(),
    "resourceVersion": _string(), "fieldPath": _string(),
})
_CORE_EVENT_FIELDS: dict[str, Schema] = {
    "involvedObject": _OBJECT_REFERENCE, "reason": _string(), "message": _string(),
    "source": _object({"component": _string(), "host": _string()}), "firstTimestamp": _time(),
    "lastTimestamp": _time(), "count": _integer(), "type": _string(), "eventTime": _time(), "series": _free(),
    "action": _string(), "related": _OBJECT_REFERENCE, "reportingComponent": _string(),
    "reportingInstance": _string(),
}
_EVENTS_V1_FIELDS: dict[str, Schema] = {
    "eventTime": _time(), "series": _free(), "reportingController": _string(), "reportingInstance": _string(),
    "action": _string(), "reason": _string(), "regarding": _OBJECT_REFERENCE, "related": _OBJECT_REFERENCE,
    "note": _string(), "type": _string(), "deprecatedSource": _free(), "deprecatedFirstTimestamp": _time(),
    "deprecatedLastTimestamp": _time(), "deprecatedCount": _integer(),
}

_NETWORK_TOPOLOGY = _object({"mode": _string(), "highestTierAllowed": _integer(), "highestTierName": _string()})
_POD_GROUP_STATUS = _object({
    "phase": _string(), "occupiedBy": _string(), "scheduled": _integer(), "running": _integer(),
    "succeeded": _integer(), "failed": _integer(), "pending": _integer(), "scheduleStartTime": _time(),
    "conditions": _array(_free(), "type"),
})
_TOPOLOGY_INFO = _object({"topologyLayer": _string(), "topologyName": _string()})
_ELASTIC_QUOTA_SPEC = _object({"min": _quantities(), "max": _quantities()})

# scheduling.k8s.io's gang API (k8s.io/api/scheduling v1alpha1 for 1.35, v1alpha2 for 1.36, v1beta1 and v1alpha3
# for 1.37).
_GANG_POLICY = _object({"basic": _object({}), "gang": _object({"minCount": _integer()}, ("minCount",))})
_METAV1_CONDITION = _object({
    "type": _string(), "status": _string(), "observedGeneration": _integer(), "lastTransitionTime": _time(),
    "reason": _string(), "message": _string(),
}, ("type", "status", "lastTransitionTime", "reason", "message"))
_TYPED_LOCAL_REFERENCE = _object({"apiGroup": _string(), "kind": _string(), "name": _string()}, ("kind", "name"))
# The PodGroup fields of 1.36 (v1alpha2) kept by 1.37 (v1beta1, v1alpha3).
_POD_GROUP_SPEC_COMMON: dict[str, Schema] = {
    "schedulingPolicy": _GANG_POLICY,
    "schedulingConstraints": _object({"topology": _array(_object({"key": _string()}, ("key",)))}),
    "priorityClassName": _string(),
    "priority": {"type": "integer", "format": "int32"},
    "resourceClaims": _array(_object({
        "name": _string(), "resourceClaimName": _string(), "resourceClaimTemplateName": _string(),
    }, ("name",)), "name"),
}
_POD_GROUP_STATUS_1_36 = _object({
    "conditions": _array(_METAV1_CONDITION, "type"),
    "resourceClaimStatuses": _array(_object({"name": _string(), "resourceClaimName": _string()}), "name"),
})

_DISRUPTION_MODE = _object({"single": _object({}), "all": _object({})})
_COMPOSITE_POLICY = _object({"basic": _object({}), "gang": _object({"minGroupCount": _integer()}, ("minGroupCount",))})
_RESOURCE_CLAIMS = {**_POD_GROUP_SPEC_COMMON["resourceClaims"], "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"]}


def _named_list(items: Schema) -> Schema:
    """A `+listType=map` list keyed by name (strategic merge patches merge its items by name)."""
    return {**_array(items, "name"), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


# A Workload's PodGroupTemplate: 1.36's (v1alpha2: disruptionMode "Pod" / "PodGroup") and 1.37's.
_POD_GROUP_TEMPLATE_FIELDS: dict[str, Schema] = {
    "name": _string(), "schedulingPolicy": _GANG_POLICY,
    "schedulingConstraints": _POD_GROUP_SPEC_COMMON["schedulingConstraints"], "resourceClaims": _RESOURCE_CLAIMS,
    "priorityClassName": _string(), "priority": _POD_GROUP_SPEC_COMMON["priority"],
}
_POD_GROUP_TEMPLATE_1_36 = _object({**_POD_GROUP_TEMPLATE_FIELDS, "disruptionMode": _string()},
                                   ("name", "schedulingPolicy"))
_POD_GROUP_TEMPLATE_1_37 = _object({**_POD_GROUP_TEMPLATE_FIELDS, "disruptionMode": _DISRUPTION_MODE,
                                    "preemptionPolicy": _string()}, ("name", "schedulingPolicy"))


def _composite_template(levels: int) -> Schema:
    """A 1.37 CompositePodGroupTemplate, its own kind nested `levels` more times: one level past the four
    validation allows, so that a tree too deep is a 422 naming its field, not an unknown field."""
    fields: dict[str, Schema] = {
        "name": _string(),
        "schedulingPolicy": _COMPOSITE_POLICY,
        "schedulingConstraints": _POD_GROUP_SPEC_COMMON["schedulingConstraints"],
        "disruptionMode": _DISRUPTION_MODE, "priorityClassName": _string(),
        "priority": _POD_GROUP_SPEC_COMMON["priority"], "preemptionPolicy": _string(),
        "podGroupTemplates": _named_list(_POD_GROUP_TEMPLATE_1_37),
    }
    if levels:
        fields["compositePodGroupTemplates"] = _named_list(_composite_template(levels - 1))
    return _object(fields, ("name", "schedulingPolicy"))


def _top(extra: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    return _object({"apiVersion": _string(), "kind": _string(), "metadata": OBJECT_META, **extra}, required)


def _crd_object(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """An object of a CRD whose `required` the server enforces (`validation.py`), as the API server does."""
    return {**_object(properties, required), "x-devcluster-required": True}


def _crd_top(extra: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    return _crd_object({"apiVersion": _string(), "kind": _string(), "metadata": OBJECT_META, **extra}, required)


def _number() -> Schema:
    return {"type": "number"}


# One resource of a KAI Queue: plain JSON numbers in KAI's units (-1: unlimited), as its CRD declares them.
_KAI_QUEUE_RESOURCE = _object({field: _number() for field in ("quota", "limit", "overQuotaWeight", "lendingLimit")})


def _label_key() -> Schema:
    """A node label key as KAI's Topology CRD declares its nodeLabel (and alias)."""
    return {**_string(), "minLength": 1, "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"}


_KAI_TOPOLOGY_CONSTRAINT = _object({
    "topology": _string(), "requiredTopologyLevel": _string(), "preferredTopologyLevel": _string(),
})


# Stored-only kinds (see resources.py): top-level fields and specs spelled out as the real types declare
# them (so a misspelt field is a 422 and strategic merge patches find their merge keys), controller-written
# statuses and deep subtrees accepted as written.
_INT_OR_STRING = _int_or_string()
_POD_TEMPLATE = _object({"metadata": OBJECT_META, "spec": POD_SPEC})
_WORKLOAD_COMMON: dict[str, Schema] = {
    "replicas": _integer(), "selector": LABEL_SELECTOR, "template": _POD_TEMPLATE, "minReadySeconds": _integer(),
    "revisionHistoryLimit": _integer(),
}
_SERVICE_SPEC = _object({
    "ports": _array(_object({
        "name": _string(), "protocol": _string(), "appProtocol": _string(), "port": _integer(),
        "targetPort": _INT_OR_STRING, "nodePort": _integer(),
    }, ("port",)), "port"),
    "selector": _map(_string()), "clusterIP": _string(), "clusterIPs": _strings(), "type": _string(),
    "externalIPs": _strings(), "sessionAffinity": _string(), "loadBalancerIP": _string(),
    "loadBalancerSourceRanges": _strings(), "externalName": _string(), "externalTrafficPolicy": _string(),
    "healthCheckNodePort": _integer(), "publishNotReadyAddresses": _boolean(), "sessionAffinityConfig": _free(),
    "ipFamilies": _strings(), "ipFamilyPolicy": _string(), "allocateLoadBalancerNodePorts": _boolean(),
    "loadBalancerClass": _string(), "internalTrafficPolicy": _string(), "trafficDistribution": _string(),
})
_POLICY_RULE = _object({
    "apiGroups": _strings(), "resources": _strings(), "verbs": _strings(), "resourceNames": _strings(),
    "nonResourceURLs": _strings(),
}, ("verbs",))
_SUBJECT = _object({"kind": _string(), "apiGroup": _string(), "name": _string(), "namespace": _string()},
                   ("kind", "name"))
_ROLE_REF = _object({"apiGroup": _string(), "kind": _string(), "name": _string()}, ("apiGroup", "kind", "name"))
_BINDING_FIELDS: dict[str, Schema] = {"subjects": _array(_SUBJECT), "roleRef": _ROLE_REF}


_NODE_SELECTOR = _object({"nodeSelectorTerms": _array(_NODE_SELECTOR_TERM)}, ("nodeSelectorTerms",))
_CLAIM_SPEC = _object({
    "accessModes": _strings(), "selector": LABEL_SELECTOR,
    "resources": _object({"requests": _quantities(), "limits": _quantities()}),
    "volumeName": _string(), "storageClassName": _string(), "volumeMode": _string(), "dataSource": _free(),
    "dataSourceRef": _free(), "volumeAttributesClassName": _string(),
})
# The volume sources a PersistentVolume may name (exactly one), each accepted as written.
_VOLUME_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk",
    "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)
_TOPOLOGY_SELECTOR_TERM = _object({"matchLabelExpressions": _array(_object({"key": _string(), "values": _strings()},
                                                                           ("key", "values")))})

def _int32() -> Schema:
    return {"type": "integer", "format": "int32"}


# A Volcano Job's (and task's) LifecyclePolicy, as batch.volcano.sh's CRD declares it.
_VCJOB_POLICY = _object({
    "action": _string(), "event": _string(), "events": _strings(), "exitCode": _int32(), "timeout": _string(),
})

# Kubeflow training-operator's v1 jobs (kubeflow.org_*jobs CRDs): the replica specs by replica type, the
# RunPolicy and JobStatus the kinds share; each kind's own fields by name, their subtrees accepted as written.
_KUBEFLOW_REPLICA_SPECS = _map(_object({"replicas": _int32(), "restartPolicy": _string(), "template": _POD_TEMPLATE}))
_KUBEFLOW_RUN_POLICY = _object({
    "cleanPodPolicy": _string(), "ttlSecondsAfterFinished": _int32(),
    "activeDeadlineSeconds": _integer(), "backoffLimit": _int32(), "suspend": _boolean(), "managedBy": _string(),
    "schedulingPolicy": _object({
        "minAvailable": _int32(), "queue": _string(), "minResources": _cr_quantities(), "priorityClass": _string(),
        "scheduleTimeoutSeconds": _int32(),
    }),
})
_KUBEFLOW_JOB_STATUS = _object({
    "conditions": _array(_object({
        "type": _string(), "status": _string(), "reason": _string(), "message": _string(),
        "lastUpdateTime": _time(), "lastTransitionTime": _time(),
    })),
    "replicaStatuses": _map(_object({
        "active": _int32(), "succeeded": _int32(), "failed": _int32(), "labelSelector": LABEL_SELECTOR,
        "selector": _string(),
    })),
    "startTime": _time(), "completionTime": _time(), "lastReconcileTime": _time(),
})


def _kubeflow_job(replica_specs: str, **own: Schema) -> Schema:
    return _top({
        "spec": _object({"runPolicy": _KUBEFLOW_RUN_POLICY, replica_specs: _KUBEFLOW_REPLICA_SPECS, **own}),
        "status": _KUBEFLOW_JOB_STATUS,
    })


# Keyed by (apiVersion, kind); the name is the component name in the OpenAPI document.
KIND_SCHEMAS: dict[tuple[str, str], tuple[str, Schema]] = {
    ("v1", "Namespace"): ("io.k8s.api.core.v1.Namespace", _top({
        "spec": _object({"finalizers": _strings()}),
        "status": _object({"phase": _string(), "conditions": _array(_CONDITION, "type")}),
    })),
    ("v1", "Node"): ("io.k8s.api.core.v1.Node", _top({"spec": _NODE_SPEC, "status": _NODE_STATUS})),
    ("v1", "Pod"): ("io.k8s.api.core.v1.Pod", _top({"spec": POD_SPEC, "status": POD_STATUS})),
    ("v1", "Event"): ("io.k8s.api.core.v1.Event", _top(_CORE_EVENT_FIELDS)),
    ("events.k8s.io/v1", "Event"): ("io.k8s.api.events.v1.Event", _top(_EVENTS_V1_FIELDS)),
    ("coordination.k8s.io/v1", "Lease"): ("io.k8s.api.coordination.v1.Lease", _top({"spec": _object({
        "holderIdentity": _string(), "leaseDurationSeconds": _integer(), "acquireTime": _time(),
        "renewTime": _time(), "leaseTransitions": _integer(), "strategy": _string(), "preferredHolder": _string(),
    })})),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("io.k8s.api.scheduling.v1.PriorityClass", _top({
        "value": _integer(), "globalDefault": _boolean(), "description": _string(), "preemptionPolicy": _string(),
    }, ("value",))),
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): ("io.x-k8s.sigs.scheduling.v1alpha1.PodGroup", _top({
        "spec": _object({
            "minMember": _integer(), "scheduleTimeoutSeconds": _integer(), "minResources": _cr_quantities(),
        }),
        "status": _POD_GROUP_STATUS,
    })),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): ("io.x-k8s.scheduling.v1alpha1.PodGroup", _top({
        "spec": _object({
            "minMember": _integer(), "scheduleTimeoutSeconds": _integer(), "minResources": _cr_quantities(),
        }),
        "status": _object({
            "phase": _string(), "occupiedBy": _string(), "running": _integer(), "succeeded": _integer(),
            "failed": _integer(), "scheduleStartTime": _time(),
        }),
    })),
    ("scheduling.k8s.io/v1alpha1", "Workload"): ("io.k8s.api.scheduling.v1alpha1.Workload", _top({
        "spec": _object({
            "controllerRef": _TYPED_LOCAL_REFERENCE,
            "podGroups": {**_array(_object({"name": _string(), "policy": _GANG_POLICY}, ("name", "policy")), "name"),
                          "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        }, ("podGroups",)),
    }, ("spec",))),
    ("scheduling.k8s.io/v1alpha2", "Workload"): ("io.k8s.api.scheduling.v1alpha2.Workload", _top({
        "spec": _object({
            "controllerRef": _TYPED_LOCAL_REFERENCE,
            "podGroupTemplates": _named_list(_POD_GROUP_TEMPLATE_1_36),
        }, ("podGroupTemplates",)),
    }, ("spec",))),
    **{(f"scheduling.k8s.io/{version}", "Workload"): (f"io.k8s.api.scheduling.{version}.Workload", _top({
        "spec": _object({
            "controllerRef": _TYPED_LOCAL_REFERENCE,
            "podGroupTemplates": _named_list(_POD_GROUP_TEMPLATE_1_37),
            "compositePodGroupTemplates": _named_list(_composite_template(4)),
        }),
    }, ("spec",))) for version in ("v1beta1", "v1alpha3")},
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): ("io.k8s.api.scheduling.v1alpha2.PodGroup", _top({
        "spec": _object({
            "podGroupTemplateRef": _object({"workload": _object({
                "workloadName": _string(), "podGroupTemplateName": _string()},
                ("workloadName", "podGroupTemplateName"))}),
            **_POD_GROUP_SPEC_COMMON,
            "disruptionMode": _string(),
        }, ("schedulingPolicy",)),
        "status": _POD_GROUP_STATUS_1_36,
    }, ("spec",))),
    **{(f"scheduling.k8s.io/{version}", "PodGroup"): (f"io.k8s.api.scheduling.{version}.PodGroup", _top({
        "spec": _object({
            "workloadRef": _object({"workloadName": _string(), "templateName": _string()},
                                   ("workloadName", "templateName")),
            **_POD_GROUP_SPEC_COMMON,
            "disruptionMode": _object({"single": _object({}), "all": _object({})}),
            "parentCompositePodGroupName": _string(),
            "preemptionPolicy": _string(),
        }, ("schedulingPolicy",)),
        "status": _POD_GROUP_STATUS_1_36,
    }, ("spec",))) for version in ("v1beta1", "v1alpha3")},
    # 1.37's alpha CompositePodGroup (the CompositePodGroup feature gate): a non-leaf group of a hierarchy.
    ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"): ("io.k8s.api.scheduling.v1alpha3.CompositePodGroup", _top({
        "spec": _object({
            "parentCompositePodGroupName": _string(),
            "workloadRef": _object({"workloadName": _string(), "templateName": _string()},
                                   ("workloadName", "templateName")),
            "schedulingPolicy": _COMPOSITE_POLICY,
            "schedulingConstraints": _POD_GROUP_SPEC_COMMON["schedulingConstraints"],
            "disruptionMode": _DISRUPTION_MODE, "priorityClassName": _string(),
            "priority": _POD_GROUP_SPEC_COMMON["priority"], "preemptionPolicy": _string(),
        }, ("workloadRef", "schedulingPolicy")),
        "status": _object({"conditions": _array(_METAV1_CONDITION, "type")}),
    }, ("spec",))),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): ("sh.volcano.scheduling.v1beta1.PodGroup", _top({
        "spec": _object({
            "minMember": _integer(), "minTaskMember": _map(_integer()), "queue": _string(),
            "priorityClassName": _string(), "minResources": _cr_quantities(), "networkTopology": _NETWORK_TOPOLOGY,
            "subGroupPolicy": _array(_object({
                "name": _string(), "networkTopology": _NETWORK_TOPOLOGY, "subGroupSize": _integer(),
                "minSubGroups": _integer(), "labelSelector": LABEL_SELECTOR, "matchLabelKeys": _strings(),
            })),
        }),
        "status": _POD_GROUP_STATUS,
    })),
    ("batch.volcano.sh/v1alpha1", "Job"): ("sh.volcano.batch.v1alpha1.Job", _top({
        "spec": _object({
            "schedulerName": _string(), "minAvailable": _int32(), "minSuccess": {**_int32(), "minimum": 1},
            "maxRetry": _int32(), "queue": _string(), "priorityClassName": _string(),
            "ttlSecondsAfterFinished": _int32(), "runningEstimate": _string(),
            "plugins": _map(_strings()), "policies": _array(_VCJOB_POLICY),
            "networkTopology": _NETWORK_TOPOLOGY,
            "tasks": _array(_object({
                "name": _string(), "replicas": _int32(), "minAvailable": _int32(), "maxRetry": _int32(),
                "template": _POD_TEMPLATE, "policies": _array(_VCJOB_POLICY),
                "dependsOn": _object({"name": _strings(), "iteration": _string()}),
            })),
        }),
        "status": _object({
            "state": _object({"phase": _string(), "reason": _string(), "message": _string(),
                              "lastTransitionTime": _time()}),
            "minAvailable": _int32(), "pending": _int32(), "running": _int32(), "succeeded": _int32(),
            "failed": _int32(), "terminating": _int32(), "unknown": _int32(), "version": _int32(),
            "retryCount": _int32(), "runningDuration": _string(), "controlledResources": _map(_string()),
            "taskStatusCount": _map(_object({"phase": _map(_int32())})),
            "conditions": _array(_object({"status": _string(), "lastTransitionTime": _time()})),
        }),
    })),
    ("kubeflow.org/v1", "PyTorchJob"): ("org.kubeflow.v1.PyTorchJob", _kubeflow_job(
        "pytorchReplicaSpecs", elasticPolicy=_free(), nprocPerNode=_string())),
    ("kubeflow.org/v1", "TFJob"): ("org.kubeflow.v1.TFJob", _kubeflow_job(
        "tfReplicaSpecs", successPolicy=_string(), enableDynamicWorker=_boolean())),
    ("kubeflow.org/v1", "XGBoostJob"): ("org.kubeflow.v1.XGBoostJob", _kubeflow_job("xgbReplicaSpecs")),
    ("kubeflow.org/v1", "PaddleJob"): ("org.kubeflow.v1.PaddleJob", _kubeflow_job(
        "paddleReplicaSpecs", elasticPolicy=_free())),
    ("kubeflow.org/v1", "JAXJob"): ("org.kubeflow.v1.JAXJob", _kubeflow_job("jaxReplicaSpecs")),
    ("kubeflow.org/v1", "MPIJob"): ("org.kubeflow.v1.MPIJob", _kubeflow_job(
        "mpiReplicaSpecs", slotsPerWorker=_int32(), mainContainer=_string(), cleanPodPolicy=_string())),
    ("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology"): (
        "sh.koordinator.scheduling.v1alpha1.ClusterNetworkTopology", _top({
            "spec": _object({"networkTopologySpec": _array(_object({
                "topologyLayer": _string(), "labelKey": _strings(), "parentTopologyLayer": _string(),
            }))}),
            "status": _object({"detailStatus": _array(_object({
                "topologyInfo": _TOPOLOGY_INFO, "parentTopologyInfo": _TOPOLOGY_INFO,
                "childTopologyLayer": _string(), "childTopologyNames": _strings(), "nodeNum": _integer(),
            }))}),
        })),
    ("topology.volcano.sh/v1alpha1", "HyperNode"): ("sh.volcano.topology.v1alpha1.HyperNode", _top({
        "spec": _object({
            "tier": _integer(), "tierName": _string(),
            "members": _array(_object({
                "type": _string(),
                "selector": _object({
                    "exactMatch": _object({"name": _string()}),
                    "regexMatch": _object({"pattern": _string()}),
                    "labelMatch": LABEL_SELECTOR,
                }),
            })),
        }),
        "status": _object({"nodeCount": _integer(), "conditions": _array(_CONDITION, "type")}),
    })),
    # KAI Scheduler (github.com/NVIDIA/KAI-Scheduler): its CRDs' structural schemas, with the value rules a
    # real API server applies from them, the Topology's two CEL rules (unique levels, the hostname last)
    # included (KAI's webhooks' rules are toposched's own checks: state/topology_validation.py).
    ("kai.scheduler/v1alpha1", "Topology"): ("ai.run.kai.v1alpha1.Topology", _crd_top({
        "spec": _crd_object({"levels": {**_array(_crd_object({
            "nodeLabel": _label_key(), "alias": _label_key(),
        }, ("nodeLabel",))), "minItems": 1, "maxItems": 16, "x-devcluster-unique": True,
            "x-devcluster-last-only": {
                "field": "nodeLabel", "value": "kubernetes.io/hostname",
                "message": "the kubernetes.io/hostname label can only be used at the lowest level of topology"}}},
            ("levels",)),
    }, ("spec",))),
    ("scheduling.run.ai/v2alpha2", "PodGroup"): ("ai.run.scheduling.v2alpha2.PodGroup", _top({
        "spec": _object({
            "minMember": {**_integer(), "minimum": 1}, "minSubGroup": {**_integer(), "minimum": 1},
            "queue": _string(), "priorityClassName": _string(),
            "preemptibility": {**_string(), "enum": ["preemptible", "non-preemptible"]},
            "topologyConstraint": _KAI_TOPOLOGY_CONSTRAINT,
            "subGroups": _array(_crd_object({
                "name": {**_string(), "minLength": 1}, "minMember": {**_integer(), "minimum": 0},
                "minSubGroup": {**_integer(), "minimum": 0}, "parent": _string(),
                "topologyConstraint": _KAI_TOPOLOGY_CONSTRAINT,
            }, ("name",))),
            "markUnschedulable": _boolean(), "schedulingBackoff": _integer(),
            # KAI 0.17: metav1.Durations (Go's form), and whether consolidation may move the gang
            "preemptionDelay": _string(), "stalenessGracePeriod": _string(), "safeToConsolidate": _boolean(),
        }),
        "status": _free(),
    })),
    ("scheduling.run.ai/v2", "Queue"): ("ai.run.scheduling.v2.Queue", _top({
        "spec": _object({
            "displayName": _string(), "parentQueue": _string(), "priority": _integer(),
            "preemptMinRuntime": _string(), "reclaimMinRuntime": _string(),
            "resources": _object({resource: _KAI_QUEUE_RESOURCE for resource in ("cpu", "memory", "gpu")}),
        }),
        "status": _free(),
    })),
    ("kueue.x-k8s.io/v1beta2", "Topology"): ("io.x-k8s.kueue.v1beta2.Topology", _top({
        "spec": _object({"levels": _array(_object({"nodeLabel": _string()}, ("nodeLabel",)))}, ("levels",)),
    })),
    ("scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota"): ("io.x-k8s.sigs.scheduling.v1alpha1.ElasticQuota", _top({
        "spec": _ELASTIC_QUOTA_SPEC, "status": _object({"used": _quantities()}),
    })),
    ("scheduling.x-k8s.io/v1alpha1", "ElasticQuota"): ("io.x-k8s.scheduling.v1alpha1.ElasticQuota", _top({
        "spec": _ELASTIC_QUOTA_SPEC, "status": _object({"used": _quantities()}),
    })),
    ("scheduling.volcano.sh/v1beta1", "Queue"): ("sh.volcano.scheduling.v1beta1.Queue", _top({
        "spec": _object({
            "weight": _integer(), "capability": _quantities(), "deserved": _quantities(),
            "guarantee": _object({"resource": _quantities()}), "reclaimable": _boolean(), "parent": _string(),
            "state": _string(), "type": _string(), "affinity": _free(), "extendClusters": _free_array(),
        }),
        "status": _object({
            "state": _string(), "pending": _integer(), "running": _integer(), "unknown": _integer(),
            "inqueue": _integer(), "completed": _integer(), "allocated": _quantities(), "reservation": _free(),
        }),
    })),
    ("v1", "ConfigMap"): ("io.k8s.api.core.v1.ConfigMap", _top({
        "data": _map(_string()), "binaryData": _map(_string()), "immutable": _boolean(),
    })),
    ("v1", "Secret"): ("io.k8s.api.core.v1.Secret", _top({
        "data": _map(_string()), "stringData": _map(_string()), "type": _string(), "immutable": _boolean(),
    })),
    ("v1", "ServiceAccount"): ("io.k8s.api.core.v1.ServiceAccount", _top({
        "secrets": _array(_OBJECT_REFERENCE, "name"), "imagePullSecrets": _array(_object({"name": _string()})),
        "automountServiceAccountToken": _boolean(),
    })),
    ("v1", "Service"): ("io.k8s.api.core.v1.Service", _top({"spec": _SERVICE_SPEC, "status": _free()})),
    ("apps/v1", "Deployment"): ("io.k8s.api.apps.v1.Deployment", _top({
        "spec": _object({
            **_WORKLOAD_COMMON, "strategy": _free(), "paused": _boolean(), "progressDeadlineSeconds": _integer(),
        }, ("selector", "template")),
        "status": _free(),
    })),
    ("apps/v1", "StatefulSet"): ("io.k8s.api.apps.v1.StatefulSet", _top({
        "spec": _object({
            **_WORKLOAD_COMMON, "serviceName": _string(), "volumeClaimTemplates": _free_array(),
            "podManagementPolicy": _string(), "updateStrategy": _free(),
            "persistentVolumeClaimRetentionPolicy": _free(), "ordinals": _free(),
        }, ("selector", "template")),
        "status": _free(),
    })),
    ("v1", "PersistentVolumeClaim"): ("io.k8s.api.core.v1.PersistentVolumeClaim", _top({
        "spec": _CLAIM_SPEC,
        "status": _object({
            "phase": _string(), "accessModes": _strings(), "capacity": _quantities(),
            "conditions": _array(_CONDITION, "type"), "allocatedResources": _quantities(),
            "allocatedResourceStatuses": _map(_string()), "currentVolumeAttributesClassName": _string(),
            "modifyVolumeStatus": _free(),
        }),
    })),
    ("v1", "PersistentVolume"): ("io.k8s.api.core.v1.PersistentVolume", _top({
        "spec": _object({
            "capacity": _quantities(), "accessModes": _strings(), "claimRef": _OBJECT_REFERENCE,
            "persistentVolumeReclaimPolicy": _string(), "storageClassName": _string(), "mountOptions": _strings(),
            "volumeMode": _string(), "nodeAffinity": _object({"required": _NODE_SELECTOR}),
            "volumeAttributesClassName": _string(), **{source: _free() for source in _VOLUME_SOURCES},
        }),
        "status": _object({"phase": _string(), "message": _string(), "reason": _string(),
                           "lastPhaseTransitionTime": _time()}),
    })),
    ("storage.k8s.io/v1", "StorageClass"): ("io.k8s.api.storage.v1.StorageClass", _top({
        "provisioner": _string(), "parameters": _map(_string()), "reclaimPolicy": _string(),
        "mountOptions": _strings(), "allowVolumeExpansion": _boolean(), "volumeBindingMode": _string(),
        "allowedTopologies": _array(_TOPOLOGY_SELECTOR_TERM),
    }, ("provisioner",))),
    ("storage.k8s.io/v1", "CSINode"): ("io.k8s.api.storage.v1.CSINode", _top({
        "spec": _object({"drivers": _array(_object({
            "name": _string(), "nodeID": _string(), "topologyKeys": _strings(),
            "allocatable": _object({"count": _integer()}),
        }, ("name", "nodeID")), "name")}, ("drivers",)),
    }, ("spec",))),
    ("apps/v1", "DaemonSet"): ("io.k8s.api.apps.v1.DaemonSet", _top({
        "spec": _object({
            "selector": LABEL_SELECTOR, "template": _POD_TEMPLATE, "updateStrategy": _free(),
            "minReadySeconds": _integer(), "revisionHistoryLimit": _integer(),
        }, ("selector", "template")),
        "status": _free(),
    })),
    ("policy/v1", "PodDisruptionBudget"): ("io.k8s.api.policy.v1.PodDisruptionBudget", _top({
        "spec": _object({
            "minAvailable": _INT_OR_STRING, "maxUnavailable": _INT_OR_STRING, "selector": LABEL_SELECTOR,
            "unhealthyPodEvictionPolicy": _string(),
        }),
        "status": _free(),
    })),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("io.k8s.api.rbac.v1.ClusterRole", _top({
        "rules": _array(_POLICY_RULE),
        "aggregationRule": _object({"clusterRoleSelectors": _array(LABEL_SELECTOR)}),
    })),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (
        "io.k8s.api.rbac.v1.ClusterRoleBinding", _top(_BINDING_FIELDS, ("roleRef",))),
    ("rbac.authorization.k8s.io/v1", "Role"): ("io.k8s.api.rbac.v1.Role", _top({"rules": _array(_POLICY_RULE)})),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): (
        "io.k8s.api.rbac.v1.RoleBinding", _top(_BINDING_FIELDS, ("roleRef",))),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", _top({
            "spec": _object({
                "group": _string(), "names": _free(), "scope": _string(), "versions": _free_array(),
                "conversion": _free(), "preserveUnknownFields": _boolean(),
            }, ("group", "names", "scope", "versions")),
            "status": _free(),
        }, ("spec",))),
}

BINDING: tuple[str, Schema] = ("io.k8s.api.core.v1.Binding", _top({"target": _OBJECT_REFERENCE}, ("target",)))
EVICTION: tuple[str, Schema] = ("io.k8s.api.policy.v1.Eviction", _top({"deleteOptions": _free()}))
DELETE_OPTIONS: Schema = _object({
    "apiVersion": _string(), "kind": _string(), "gracePeriodSeconds": _integer(), "preconditions": _free(),
    "orphanDependents": _boolean(), "propagationPolicy": _string(), "dryRun": _strings(),
})
