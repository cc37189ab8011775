"""How a cluster running Volcano admits a `batch.volcano.sh/v1alpha1` Job (vcjob): its mutating webhook's
defaults, then its ValidatingAdmissionPolicy's rules.

Defaults, on create only (pkg/webhooks/admission/jobs/mutate/mutate_job.go `createPatch`, in its order):
`spec.queue` "" -> "default"; `spec.schedulerName` "" -> "volcano"; `spec.maxRetry` 0 -> 3; per task a
missing name -> `default<index>`, `hostNetwork` without a dnsPolicy -> ClusterFirstWithHostNet, no
`minAvailable` -> the task's replicas, `maxRetry` 0 -> 3; then `spec.minAvailable` 0 -> the sum of the tasks'
minAvailable (each now set: its own, or its replicas); and with the tensorflow or mpi plugin the svc plugin,
with mpi the ssh plugin.

Validation, on create and update (pkg/webhooks/admission/jobs/policies/validating-admission-policy.yaml,
`job-validation-policy` bound by `job-validation-policy-binding`, which newer Volcano installs in place of the
job webhook's checks): each rule in the policy's order, the first one that fails refuses the write as the API
server refuses a ValidatingAdmissionPolicy's denial: 422 Invalid, message `jobs.batch.volcano.sh "<name>" is
forbidden: ValidatingAdmissionPolicy 'job-validation-policy' with binding 'job-validation-policy-binding'
denied request: <the rule's message>`, the same text as the one cause (no field: the policy's messages name
the field themselves, e.g. "'minAvailable' is greater than 'replicas' in task"). The rules: minAvailable,
maxRetry, ttlSecondsAfterFinished not negative; at least one task; task names unique and RFC 1123 labels;
replicas and task minAvailable not negative, task minAvailable <= replicas, job minAvailable <= the sum of
replicas; the policies' events and actions known, event and exitCode not both, one of event / events /
exitCode, exitCode not 0, no event or exitCode twice, "*" alone; on update the same number of tasks and the
same queue; the job's name a qualified name.

Not done: the job webhook's checks the policy does not carry (the queue exists and is Open, the plugins are
known, each task's pod template is a valid pod, a DAG of dependsOn), and spec.volumes (not served).

Pure: no I/O, the objects it is given are not mutated.
"""

from __future__ import annotations

import re
from typing import Any

from devcluster.volcano_job import as_dict, as_int, as_list

Obj = dict[str, Any]

DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_PREFIX = "default"  # batch v1alpha1 DefaultTaskSpec
POLICY = "job-validation-policy"
BINDING = "job-validation-policy-binding"

_VALID_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "PodRunning", "Unknown", "TaskCompleted",
                 "OutOfSync", "CommandIssued", "JobUpdated", "TaskFailed")
_VALID_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob", "CompleteJob", "ResumeJob",
                  "SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _task_min_available(task: Obj) -> int:
    found = task.get("minAvailable")
    return as_int(found) if found is not None else as_int(task.get("replicas"))


def defaulted(job: Obj) -> Obj:
    """The job as Volcano's mutating webhook passes it on at its creation."""
    spec = dict(as_dict(job.get("spec")))
    if not spec.get("queue"):
        spec["queue"] = DEFAULT_QUEUE
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    if not as_int(spec.get("maxRetry")):
        spec["maxRetry"] = DEFAULT_MAX_RETRY
    tasks = []
    for index, raw in enumerate(as_list(spec.get("tasks"))):
        task = dict(as_dict(raw))
        if not task.get("name"):
            task["name"] = f"{DEFAULT_TASK_PREFIX}{index}"
        template = as_dict(task.get("template"))
        pod_spec = as_dict(template.get("spec"))
        if pod_spec.get("hostNetwork") and not pod_spec.get("dnsPolicy"):
            task["template"] = {**template, "spec": {**pod_spec, "dnsPolicy": "ClusterFirstWithHostNet"}}
        if task.get("minAvailable") is None:
            task["minAvailable"] = as_int(task.get("replicas"))
        if not as_int(task.get("maxRetry")):
            task["maxRetry"] = DEFAULT_MAX_RETRY
        tasks.append(task)
    if "tasks" in spec:
        spec["tasks"] = tasks
    if not as_int(spec.get("minAvailable")):
        spec["minAvailable"] = sum(_task_min_available(task) for task in tasks)
    plugins = spec.get("plugins")
    if isinstance(plugins, dict):
        plugins = dict(plugins)
        if ("tensorflow" in plugins or "mpi" in plugins) and "svc" not in plugins:
            plugins["svc"] = []
        if "mpi" in plugins and "ssh" not in plugins:
            plugins["ssh"] = []
        spec["plugins"] = plugins
    return {**job, "spec": spec}


def _policy_problem(policies: list[Obj]) -> str | None:
    """The policy's rules on `spec.policies`, in its order."""
    if not all(p.get("event") is None or p.get("event") in _VALID_EVENTS for p in policies):
        return "invalid policy event"
    if not all(p.get("action") is None or p.get("action") in _VALID_ACTIONS for p in policies):
        return "invalid policy action"
    if any(p.get("event") is not None and p.get("exitCode") is not None for p in policies):
        return "must not specify event and exitCode simultaneously"
    if not all(p.get("event") is not None or p.get("exitCode") is not None or as_list(p.get("events"))
               for p in policies):
        return "either event and exitCode should be specified"
    if any(p.get("exitCode") == 0 and p.get("exitCode") is not None for p in policies):
        return "0 is not a valid error code"
    events = [p["event"] for p in policies if p.get("event") is not None]
    if len(set(events)) != len(events):
        return "duplicate policy event found"
    codes = [p["exitCode"] for p in policies if p.get("exitCode") is not None]
    if len(set(codes)) != len(codes):
        return "duplicate exitCode found"
    if "*" in events and len(events) != 1:
        return "if there's * here, no other policy should be here"
    return None


def _qualified_name_errors(name: str) -> list[str]:
    """format.qualifiedName()'s errors (IsQualifiedName), worded as apimachinery words them."""
    errors: list[str] = []
    prefix, _, local = name.rpartition("/") if "/" in name else ("", "", name)
    if name.count("/") > 1:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')"]
    if "/" in name:
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                          "characters, '-' or '.', and must start and end with an alphanumeric character")
    if not local:
        errors.append("name part must be non-empty")
    else:
        if len(local) > 63:
            errors.append("name part must be no more than 63 bytes")
        if not _QUALIFIED_NAME.fullmatch(local):
            errors.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                          "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                          "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return errors


def refusal(job: Obj, old: Obj | None = None) -> str | None:
    """The message of the first rule of Volcano's job-validation-policy the job fails (`old`: on update), or
    None if it passes them all."""
    spec = as_dict(job.get("spec"))
    tasks = [as_dict(task) for task in as_list(spec.get("tasks"))]
    if as_int(spec.get("minAvailable")) < 0:
        return "job 'minAvailable' must be >= 0"
    if as_int(spec.get("maxRetry")) < 0:
        return "'maxRetry' cannot be less than zero"
    if as_int(spec.get("ttlSecondsAfterFinished")) < 0:
        return "'ttlSecondsAfterFinished' cannot be less than zero"
    if not tasks:
        return "No task specified in job spec"
    names = [task.get("name") for task in tasks]
    if len(set(map(str, names))) != len(names):
        return "duplicated task name found"
    if not all(isinstance(name, str) and len(name) <= 63 and _DNS1123_LABEL.fullmatch(name) for name in names):
        return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters"
    if any(as_int(task.get("replicas")) < 0 for task in tasks):
        return "'replicas' < 0 in task"
    if any(task.get("minAvailable") is not None and as_int(task.get("minAvailable")) < 0 for task in tasks):
        return "'minAvailable' < 0 in task"
    if any(task.get("minAvailable") is not None and task.get("replicas") is not None
           and as_int(task.get("minAvailable")) > as_int(task.get("replicas")) for task in tasks):
        return "'minAvailable' is greater than 'replicas' in task"
    total_replicas = sum(as_int(task.get("replicas")) for task in tasks)
    if spec.get("minAvailable") is not None and as_int(spec.get("minAvailable")) > total_replicas:
        return "job 'minAvailable' should not be greater than total replicas in tasks"
    problem = _policy_problem([as_dict(policy) for policy in as_list(spec.get("policies"))])
    if problem is not None:
        return problem
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        if len(as_list(old_spec.get("tasks"))) != len(tasks):
            return "job updates may not add or remove tasks"
        if not old_spec.get("queue") or not spec.get("queue") or old_spec.get("queue") != spec.get("queue"):
            return ("job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
                    "and `PriorityClassName`")
        if spec.get("minAvailable") is not None and as_int(spec.get("minAvailable")) > total_replicas:
            return "job 'minAvailable' must not be greater than total replicas"
    name = as_dict(job.get("metadata")).get("name")
    if isinstance(name, str) and name:
        errors = _qualified_name_errors(name)
        if errors:
            return "job name errors: " + "; ".join(errors)
    return None


def denial_message(message: str) -> str:
    """What the API server makes of the policy's message (the cause's message, without the resource prefix)."""
    return f"ValidatingAdmissionPolicy '{POLICY}' with binding '{BINDING}' denied request: {message}"
