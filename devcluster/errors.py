"""Kubernetes API errors: the one exception devcluster raises for an expected failure.

An `ApiError` carries what a real API server puts in its `Status` body (code, reason, message,
details). The HTTP layer turns it into that body; the store and validators raise it. Constructors
below mirror the apimachinery helpers (NewNotFound, NewConflict, ...) so the messages read the same
as a real cluster's. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answer: HTTP `code`, Status `reason`, human `message` and optional `details`.

    `http_status`, when set, is the HTTP status the answer goes out with instead of `code`: a handler
    of the real server may return a failure `Status` as its result, which is written with the verb's
    success status while the body keeps its own `code` (see `multiple_disruption_budgets`).
    """

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None,
        retry_after: int | None = None, http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after
        self.http_status = http_status

    def status(self) -> dict[str, Any]:
        """The `Status` object a real API server answers with (no `reason` when it has none)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]
        if self.details is not None:
            body["details"] = self.details
        return body


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "group": group, "kind": plural}
                    if group else {"name": name, "kind": plural})


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists', details)


def conflict(plural: str, name: str, why: str, group: str = "") -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": {why}', details)


def stale(plural: str, name: str, group: str = "") -> ApiError:
    return conflict(
        plural, name, "the object has been modified; please apply your changes to the latest version and try again",
        group,
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "") -> ApiError:
    """422 Invalid; `causes` are (reason, field, message) like field.ErrorList."""
    text = "; ".join(f"{field}: {message}" if field else message for _, field, message in causes)
    if len(causes) > 1:
        text = f"[{', '.join(f'{f}: {m}' if f else m for _, f, m in causes)}]"
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": reason, "message": message, "field": field} for reason, field, message in causes],
    }
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {text}' if group
                    else f'{kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def unsupported_media_type(content_type: str, accepted: tuple[str, ...] = ()) -> ApiError:
    """415 naming the media types this resource accepts (for a PATCH, those its OpenAPI advertises)."""
    listed = ", ".join(accepted or ("application/json", "application/yaml"))
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media "
                    f'types include: {listed} (got "{content_type}")', {})


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"  # policy/v1 DisruptionBudgetCause


def disruption_budget_refused(cause: str) -> ApiError:
    """429 of an eviction a PodDisruptionBudget refuses, as the eviction handler builds it
    (NewTooManyRequests with no retry delay: no `Retry-After`, no `retryAfterSeconds`), `cause` in
    `details.causes`."""
    return ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                    {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]})


def multiple_disruption_budgets() -> ApiError:
    """An eviction of a pod more than one PodDisruptionBudget selects. The eviction handler returns this
    failure Status (code 500, no reason, no details) as its result rather than as an error, so the
    answer goes out with the create's HTTP 201; clients read the body (client-go turns it into an error
    with code 500)."""
    return ApiError(500, "", "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
                    "not support.", http_status=201)


def policy_denied(plural: str, group: str, name: str, message: str) -> ApiError:
    """A ValidatingAdmissionPolicy's denial with reason Invalid, as the API server answers it (its validating
    dispatcher: admission.NewForbidden's message and details, then code 422, reason Invalid, and the denial
    as the one cause). `message` is the denial: `ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
    denied request: <the rule's message>`."""
    resource = f"{plural}.{group}" if group else plural
    details: dict[str, Any] = {"name": name or "Unknown", "kind": plural, "causes": [{"message": message}]}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{resource} "{name or "Unknown"}" is forbidden: {message}', details)
