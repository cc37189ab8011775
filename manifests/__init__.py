"""manifests: Kubernetes objects as files hold them, and what an API server makes of them.

Two programs read Kubernetes objects that no real API server has seen: `toposched simulate` (a
scenario is the objects a cluster holds) and devcluster (the API server of the demo and the tests,
including `toposched devcluster --load`). Both must see exactly what a real cluster would store, or
a scenario that simulates one way runs another way on a cluster. This package is the one place
that knows it, so that they cannot disagree:

- `files`: reading YAML streams, JSON, NDJSON, `kind: List` and directories (`read_manifests`);
- `quantity`: resource quantities and their canonical form;
- `defaulting`: decoding and `SetDefaults_*` (requests from limits, schedulerName, ...);
- `validation`: the 422 rules, with the real field paths and words;
- `admission`: a create / update / scenario load as the pipeline of the three plus the Priority
  and DefaultTolerationSeconds admission plugins (and PodGroupProtection, which devcluster's store
  runs on its creates).

Layering: below `events/` and `devcluster/` and importing nothing of ours, so that the scheduler's
packages and the standalone API server can both use it without depending on each other (DESIGN.md:
`events/` and `devcluster/` import nothing of ours; this package is the shared floor under both,
like a third-party library would be). Everything but `files` is pure: no I/O, no clock.
"""

from manifests.admission import Loaded, Rejected, SpecMemo, admit_create, admit_update, load_object
from manifests.files import ManifestFileError, read_manifests

__all__ = [
    "Loaded",
    "ManifestFileError",
    "Rejected",
    "SpecMemo",
    "admit_create",
    "admit_update",
    "load_object",
    "read_manifests",
]
