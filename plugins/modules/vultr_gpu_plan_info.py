# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vultr_gpu_plan_info
short_description: Vultr GPU plans with GPU model, count, VRAM and price, and availability in a region
description:
  - Lists the GPU plans (ids starting with C(vcg-)). It queries C(GET /plans?type=all) and filters on the id,
    because whole-GPU plans report C(type=vdm) and only fractional slices report C(type=vcg).
  - Vultr has no GPU-count field. The count is derived from the total VRAM (C(gpu_vram_gb), else the
    C(<n>vram) part of the id) divided by the VRAM of one whole GPU of the model. Plans below one GPU are
    fractional vGPU slices (RV(plans[].fractional)).
  - With O(region), each plan says whether it is available there (C(GET /regions/{region}/availability)).
    Preflight uses this to reject an unknown or unavailable plan before anything is created.
  - No API lists the plans VKE accepts in node pools, so availability in a region is necessary but not
    sufficient.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.info_module
  - metalplane.inference.vultr
options:
  plan:
    description:
      - Only these plan ids. Ids that are not GPU plans or do not exist are listed in RV(missing).
    type: list
    elements: str
  region:
    description:
      - Region id whose availability is reported per plan.
    type: str
  available_only:
    description:
      - With O(region), return only the plans available there.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: GPU plans available in ewr
  metalplane.inference.vultr_gpu_plan_info:
    region: ewr
    available_only: true
  register: gpu

- name: Preflight a pool plan
  metalplane.inference.vultr_gpu_plan_info:
    plan: [vcg-l40s-16c-180g-48vram]
    region: ewr
  register: wanted
  failed_when: wanted.missing or not wanted.plans[0].available
"""

RETURN = r"""
plans:
  description: GPU plans, sorted by id.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Plan id.
      type: str
    gpu_model:
      description: GPU model, lower case (for example C(l40s)).
      type: str
    gpu_count:
      description: Whole GPUs in the plan (1 for a fractional slice); null when the model is unknown.
      type: int
    fractional:
      description: Whether the plan is a slice of one GPU.
      type: bool
    gpu_vram_gb_per_gpu:
      description: VRAM of one GPU (of the slice, for a fractional plan), in GB.
      type: int
    gpu_vram_gb_total:
      description: VRAM of the whole plan, in GB.
      type: int
    monthly_cost:
      description: Monthly price in USD.
      type: float
    available:
      description: Whether the plan is available in O(region).
      type: bool
      returned: when O(region) is set
missing:
  description: Requested plan ids that are not GPU plans Vultr lists.
  returned: always
  type: list
  elements: str
api_requests:
  description: API requests made by this task.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.args import vultr_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VULTR_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.info import run_gpu_plan_info


def argument_spec() -> dict[str, Any]:
    return {
        **vultr_argument_spec(),
        "plan": {"type": "list", "elements": "str"},
        "region": {"type": "str"},
        "available_only": {"type": "bool", "default": False},
    }


def main() -> None:
    module = MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.require("vultr-python", VULTR_IMPORT_ERROR)
    module.run(run_gpu_plan_info)


if __name__ == "__main__":
    main()
