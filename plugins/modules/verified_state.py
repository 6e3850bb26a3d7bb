# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record that a phase was verified, and later ask whether that record still holds (one read, no wait)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: verified_state
short_description: Record a verified phase and tell whether the record still holds
version_added: 0.1.0
description:
  - Lets a phase of a reconcile (the Longhorn storage role, for example) skip its writes and readiness waits when
    nothing of its own changed since it last passed them all, in one module run instead of one per object.
  - V(present) records, for O(phase), the O(digest) of the phase's inputs and one line per watched object (its
    C(uid), and its C(metadata.generation) or C(resourceVersion) when O(watch[].identity) asks). It refuses to
    record while a watched object is missing or does not satisfy its O(watch[].expression). Write it as the phase's
    last step, after every wait passed.
  - V(query) reads the record and the watched objects and returns RV(verified) true only when the record exists,
    its digest equals O(digest), every watched object has the same line as recorded, and every expression holds
    now. Otherwise RV(reasons) says why, and the phase should run in full.
  - V(absent) removes the phase's record.
  - The record is one key of a ConfigMap (O(record)) in O(namespace); put it in the namespace the phase owns, so
    that removing the phase removes its record.
  - A run killed before the phase wrote its record leaves the previous record, whose digest or object lines do not
    match what the killed run changed, so the next run runs the phase in full.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.kube
attributes:
  check_mode:
    support: full
    details:
      - V(query) is read-only. V(present) and V(absent) say whether they would write, and write nothing.
  diff_mode:
    support: none
options:
  phase:
    description: The phase the record is for; the ConfigMap key (letters, digits, C(-), C(_), C(.)).
    type: str
    required: true
  state:
    description: V(query) to ask, V(present) to record, V(absent) to forget.
    type: str
    choices: [query, present, absent]
    default: query
  namespace:
    description: Namespace of the record's ConfigMap.
    type: str
    required: true
  record:
    description: Name of the record's ConfigMap.
    type: str
    default: metalplane-verified
  digest:
    description:
      - A digest of everything the phase is asked to converge to, computed by the caller (for example
        C({{ inputs | to_json | hash('sha256') }})). Never a secret itself; a hash of secrets is fine.
      - Required with V(query) and V(present).
    type: str
  watch:
    description:
      - The objects whose state the phase verified. Required with V(query) and V(present).
    type: list
    elements: dict
    suboptions:
      api_version:
        description: API group/version.
        type: str
        default: v1
      kind:
        description: Kind.
        type: str
        required: true
      namespace:
        description: Namespace (omit for cluster-scoped kinds).
        type: str
      name:
        description: The one object; omitted, every object of the kind (matching O(watch[].label_selectors)).
        type: str
      label_selectors:
        description: Label selector terms (ANDed), checked before any request.
        type: list
        elements: str
      expression:
        description:
          - A JMESPath expression every matched object must make V(true), as in M(metalplane.inference.kube_ready).
        type: str
      identity:
        description:
          - What in an object counts as a change. V(uid) - only deleting and recreating it (or, for a list, an object
            added or removed). V(generation) - also an edit of its spec. V(version) - any write (kinds without a
            C(generation), such as a StorageClass).
        type: str
        choices: [uid, generation, version]
        default: uid
notes:
  - At least one object must match each O(watch) entry.
  - The module never returns the objects it reads (a watched Secret stays unread in the output); only their lines
    (kind, name, uid, generation or resourceVersion).
"""

EXAMPLES = r"""
- name: Ask whether the storage phase is still as verified
  metalplane.inference.verified_state:
    kubeconfig: "{{ workload_kubeconfig }}"
    namespace: longhorn-system
    phase: storage
    digest: "{{ storage_inputs | to_json | hash('sha256') }}"
    watch:
      - {kind: Node}
      - api_version: apps/v1
        kind: DaemonSet
        namespace: longhorn-system
        name: longhorn-manager
        identity: generation
        expression: "status.numberReady == status.desiredNumberScheduled"
      - {kind: Secret, namespace: longhorn-system, label_selectors: ["owner=helm", "name=longhorn", "status=deployed"]}
  register: storage_verified

- name: Record it, after every wait of the phase passed
  metalplane.inference.verified_state:
    kubeconfig: "{{ workload_kubeconfig }}"
    namespace: longhorn-system
    phase: storage
    state: present
    digest: "{{ storage_inputs | to_json | hash('sha256') }}"
    watch: "{{ storage_watch }}"
  when: not storage_verified.verified
"""

RETURN = r"""
verified:
  description: With V(query), whether the record still holds.
  returned: always
  type: bool
reasons:
  description: Why the record does not hold (empty when it does), or why V(present) refused to record.
  returned: always
  type: list
  elements: str
  sample: ["the phase's inputs changed since it was verified"]
verified_at:
  description: When the record was written (UTC), or null when there is none.
  returned: always
  type: str
objects:
  description: The watched objects' lines as seen now (V(query), V(present)).
  returned: always
  type: list
  elements: str
  sample: ["apps/v1 DaemonSet longhorn-system/longhorn-manager uid=8c1f... generation=3"]
"""

import os
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._kube import object_store
from ansible_collections.metalplane.inference.plugins.module_utils._kube import verified_state as record
from ansible_collections.metalplane.inference.plugins.module_utils._kube.args import kube_argument_spec, resolve_auth
from ansible_collections.metalplane.inference.plugins.module_utils._kube.readiness import JMESPATH_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.validate import dns_label


def argument_spec() -> dict[str, Any]:
    return {
        **kube_argument_spec(),
        "phase": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["query", "present", "absent"], "default": "query"},
        "namespace": {"type": "str", "required": True},
        "record": {"type": "str", "default": record.DEFAULT_RECORD_NAME},
        "digest": {"type": "str"},
        "watch": {
            "type": "list",
            "elements": "dict",
            "options": {
                "api_version": {"type": "str", "default": "v1"},
                "kind": {"type": "str", "required": True},
                "namespace": {"type": "str"},
                "name": {"type": "str"},
                "label_selectors": {"type": "list", "elements": "str"},
                "expression": {"type": "str"},
                "identity": {"type": "str", "choices": list(record.IDENTITIES), "default": "uid"},
            },
        },
    }


def run(module: Any, store_factory: object_store.StoreFactory | None = None) -> dict[str, Any]:
    params = module.params
    phase = record.check_phase(params["phase"])
    namespace = dns_label("namespace", params["namespace"])
    name = params["record"]
    state = params["state"]
    watched: list[record.Watched] = []
    if state != "absent":
        module.require("jmespath", JMESPATH_IMPORT_ERROR)
        if not params.get("digest"):
            raise InputError("digest", f"is required with state={state}: a digest of the phase's inputs")
        watched = record.parse_watch(params.get("watch") or [])
    with object_store.opened_store(module, store_factory, connector(module)) as store:
        _found, entries = record.read_record(store, namespace, name)
        entry = entries.get(phase)
        result: dict[str, Any] = {
            "changed": False,
            "verified": False,
            "reasons": [],
            "verified_at": (entry or {}).get("verified_at"),
            "objects": [],
        }
        if state == "absent":
            result["changed"] = entry is not None
            if entry is not None and not module.check_mode:
                record.write_entry(store, namespace, name, phase, None)
            return result
        observation = record.observe(store, watched)
        result["objects"] = observation.lines
        if state == "query":
            result["reasons"] = record.decide(entry, params["digest"], observation)
            result["verified"] = not result["reasons"]
            return result
        if observation.problems:
            raise record_refused(phase, observation.problems)
        wanted = record.new_entry(params["digest"], observation)
        result["verified"] = True
        if record.same_entry(entry, wanted):
            return result
        result["changed"] = True
        if not module.check_mode:
            record.write_entry(store, namespace, name, phase, wanted)
            result["verified_at"] = wanted["verified_at"]
        return result


def connector(module: Any) -> object_store.StoreFactory:
    """Every connection option of the kube fragment and its K8S_AUTH_* fallbacks, as kube_ready reads them."""

    def connect(params: Any) -> object_store.KubeObjectStore:
        from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KubeClient

        auth = resolve_auth(dict(params), dict(os.environ))
        module.log_secret(auth.get("api_key"))
        return object_store.KubeObjectStore(KubeClient.from_auth(auth))

    return connect


def record_refused(phase: str, problems: list[str]) -> MetalplaneError:
    return MetalplaneError(
        f"Not recording phase {phase!r} as verified: " + "; ".join(problems[:5]),
        details={"reasons": problems},
    )


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run)


if __name__ == "__main__":
    main()
