#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_reset
short_description: Free the GPUs of a host or of one Proxmox container, bounded in time
version_added: 0.1.0
description:
  - Finds the processes that hold the GPUs (C(nvidia-smi --query-compute-apps), C(fuser -v) on the device nodes,
    and a scan of C(/proc/*/fd) when C(fuser) is missing or fails).
  - Keeps only the holders of this host, or, with O(vmid) on a Proxmox VE node, only those of that container
    (from C(/proc/<pid>/cgroup)); never pid 1, this module and its parents, O(protected_pids),
    O(protected_names) and the system daemons (C(systemd), C(sshd), C(nvidia-persistenced), ...).
  - Sends SIGTERM, waits up to O(term_grace) (polling C(/proc) every 50 ms), sends SIGKILL to what is left,
    then waits until every GPU's used memory is under O(memory_threshold_mib) (polling C(nvidia-smi) every 100 ms).
  - Everything is bounded by O(timeout); past it the module fails and says what is still held and by whom.
  - With O(stop_unit), a systemd unit (the SGLang service) is stopped first, bounded by O(stop_timeout), so that one
    call does the whole clean-up. The unit's own processes end the way systemd ends them, then what still holds a
    GPU is ended.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
  - llmserve.sglang.gpu_free
attributes:
  check_mode:
    support: full
    details: Lists the holders and what it would kill (RV(would_kill)); sends no signal.
  diff_mode:
    support: none
  platform:
    platforms: posix
    details: Linux (C(/proc)).
options:
  vmid:
    description:
      - Run on a Proxmox VE node and clean up only the processes of this container.
      - When not set, only processes of the host the module runs on are touched (inside a container, the container's own).
    type: int
  stop_unit:
    description:
      - A systemd unit to stop before looking for holders (C(systemctl stop), for at most O(stop_timeout) seconds; when
        it does not finish in time, C(systemctl kill --signal=SIGKILL) ends what the unit still runs).
      - A unit that is not loaded or not running is left alone.
      - With O(vmid) the unit is the container's, stopped with C(pct exec VMID -- ...) from the node.
      - O(kill_unit) kills its processes before the stop. With O(gpus), a holder that runs in this unit is not
        another service's.
    type: str
notes:
  - Inside an LXC container C(nvidia-smi) lists no processes (the driver reports node PIDs); there the holders are
    found through the device nodes. From the node, set O(vmid) to clean one container up.
  - A holder in D state (uninterruptible sleep) or a zombie is reported in RV(holders) with its state.
seealso:
  - module: llmserve.sglang.gpu_info
'''

EXAMPLES = r'''
- name: Free the GPUs of this host
  llmserve.sglang.gpu_reset:
    term_grace: 5
    timeout: 60

- name: Free the GPUs of container 129, from its Proxmox node
  llmserve.sglang.gpu_reset:
    vmid: 129
  delegate_to: pve01

- name: Stop the SGLang unit, then free the GPUs (one call)
  llmserve.sglang.gpu_reset:
    stop_unit: sglang.service
    stop_timeout: 60

- name: Free GPUs 4 to 7 only (another service serves on 0 to 3)
  llmserve.sglang.gpu_reset:
    stop_unit: sglang-b.service
    gpus: [4, 5, 6, 7]

- name: Preview (kills nothing)
  llmserve.sglang.gpu_reset:
  check_mode: true
  register: preview
'''

RETURN = r'''
holders:
  description: Every process found holding a GPU device or GPU memory.
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: PID (as seen where the module runs)., type: int}
    name: {description: Process name., type: str}
    sources: {description: "Where it was found: nvidia-smi, fuser or proc.", type: list, elements: str}
    devices: {description: Device nodes it holds., type: list, elements: str}
    gpus: {description: GPU indices (from nvidia-smi)., type: list, elements: int}
    used_mib: {description: GPU memory it holds per nvidia-smi (MiB)., type: int}
    vmid: {description: Proxmox container it belongs to; null for the node's own., type: int}
    state: {description: "Process state letter (R, S, D, Z and so on).", type: str}
    cmdline: {description: Its command line., type: str}
killed:
  description: Processes that ended, with the signal that ended them.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 419, name: python3, signal: SIGTERM, vmid: null, seconds: 0.15}]
would_kill:
  description: In check mode, the processes that would be signalled.
  returned: always
  type: list
  elements: dict
spared:
  description: Holders left alone, each with C(why).
  returned: always
  type: list
  elements: dict
blocked:
  description:
    - With O(gpus), the holders of GPUs inside and outside the subset, each with C(why); when there is one, the module
      fails and signals nobody.
  returned: always
  type: list
  elements: dict
  version_added: 0.1.0
gpus:
  description: The indices of the GPUs freed (O(gpus) resolved; every GPU of the host by default).
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3]
memory_before:
  description: Used memory per GPU before.
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, used_mib: 21265, total_mib: 143771}]
memory_after:
  description: Used memory per GPU at the end.
  returned: always
  type: list
  elements: dict
unit_stop:
  description:
    - What O(stop_unit) did; C(result) is V(not_loaded), V(not_active), V(stopped), V(killed) (the stop timed out) or,
      in check mode, V(would_stop).
  returned: when O(stop_unit) is set
  type: dict
  sample: {unit: sglang.service, before: active, result: stopped, seconds: 0.41}
seconds:
  description: Time the module took to free the GPUs (after the unit's stop).
  returned: always
  type: float
seconds_to_free:
  description: Time from the first signal until every GPU was under the threshold (null when it never was).
  returned: always
  type: float
hard_reset_done:
  description: GPU indices reset with O(hard_reset).
  returned: always
  type: list
  elements: int
sources_used:
  description: The holder sources consulted.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_free
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders


def main():
    module = AnsibleModule(
        argument_spec=dict(
            _specs.gpu_free_argument_spec(),
            redact_values=redact.argument_spec()['redact_values'],
            vmid=dict(type='int'),
            stop_unit=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    redact.guard(module)
    bounds = gpu_free.bounds_error(p)
    if bounds:
        module.fail_json(msg=bounds)
    unit_stop = None
    if p['stop_unit']:
        try:
            unit_stop = gpu_holders.stop_unit(module.run_command, p['stop_unit'], p['stop_timeout'],
                                              vmid=p['vmid'], check_mode=module.check_mode, kill=p['kill_unit'])
        except RuntimeError as exc:
            module.fail_json(msg='stop_unit: %s' % exc)
    try:
        ok, result, msg = gpu_free.free(module.run_command, lambda name, dirs: module.get_bin_path(name, opt_dirs=dirs),
                                        p, check_mode=module.check_mode, warn=module.warn, own_unit=p['stop_unit'])
    except gpu_free.FreeError as exc:
        module.fail_json(msg=exc.msg, **exc.extra)
    if unit_stop is not None:
        result['unit_stop'] = unit_stop
        result['changed'] = result['changed'] or unit_stop['result'] in ('stopped', 'killed', 'would_stop')
    if not ok:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
