#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_status
short_description: What an SGLang service serves now, read without changing anything
version_added: 0.2.0
description:
  - Reads the unit's state (C(systemctl show)), the arguments of its C(ExecStart) (the API key masked), the names
    of the variables of its environment file (never their values), its health (C(GET /health) with the API key), the
    GPU memory of each process nvidia-smi lists (marked whether it belongs to the service), and the host's record
    of deploys (the selected configuration and the last entries).
  - Changes nothing; the result is the same in check mode.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
  - llmserve.sglang.endpoint
attributes:
  check_mode:
    support: full
    details: Reads only; the same result as without check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  service_name:
    description: The systemd service, without C(.service).
    type: str
    default: sglang
  unit_dir:
    description: Where the unit file is.
    type: path
    default: /etc/systemd/system
  env_dir:
    description: Where the environment file C(<service_name>.env) is.
    type: path
    default: /etc/llmserve
  state_dir:
    description: The service's state directory (its C(record.json)).
    type: path
    default: /var/lib/llmserve/sglang
  timeout:
    description: Seconds the health check may take.
    type: float
    default: 10
  nvidia_smi:
    description: The nvidia-smi binary (a missing one gives an empty RV(gpu_processes)).
    type: str
    default: nvidia-smi
'''

EXAMPLES = r'''
- name: What does this host serve?
  llmserve.sglang.sglang_status:
    service_name: sglang
    port: 30000
    api_key: "{{ sglang_api_key | default(omit) }}"
  register: status
'''

RETURN = r'''
summary:
  description: V(serving) (active and healthy), V(active, health ...), the unit's C(ActiveState), or V(not deployed).
  returned: always
  type: str
  sample: serving
needs_restart:
  description:
    - Whether the unit is active but its server does not answer its health check (no answer, or an error status other
      than 401 and 403), what C(playbooks/heal.yml) restarts.
  returned: always
  type: bool
  sample: false
unit:
  description: The unit's C(systemctl show) properties (state, C(MainPID), C(InvocationID), C(NRestarts), C(Result)).
  returned: always
  type: dict
main_pid:
  description: The unit's main PID (0 when not running).
  returned: always
  type: int
argv:
  description: The C(ExecStart) arguments of the unit file (C(${SGLANG_API_KEY}) as written, any literal key masked).
  returned: always
  type: list
  elements: str
backends:
  description: The backend, quantization and C(--tp-size) values of RV(argv).
  returned: always
  type: dict
  sample: {--moe-runner-backend: flashinfer_cutlass, --tp-size: "8"}
env_names:
  description: The names of the variables of the environment file (values are never returned).
  returned: always
  type: list
  elements: str
health:
  description: C(status) (V(ready), V(unhealthy), V(unauthorized), V(down)), C(http_status), C(seconds), C(error).
  returned: always
  type: dict
gpu_processes:
  description: Each process nvidia-smi lists (C(pid), C(name), C(gpu), C(used_mib)), C(service) true for the service's.
  returned: always
  type: list
  elements: dict
gpu_memory_mib:
  description: GPU memory the service's processes use, in MiB.
  returned: always
  type: int
selected:
  description: The name of the configuration the record says serves (null when none).
  returned: always
  type: str
record:
  description: C(selected), the number of C(entries) and the C(last) five entries of the record.
  returned: always
  type: dict
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi as nsmi
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http
from ansible_collections.llmserve.sglang.plugins.module_utils import status as statuslib


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _cgroup_pids(control_group):
    if not control_group:
        return []
    text = _read(os.path.join('/sys/fs/cgroup', control_group.lstrip('/'), 'cgroup.procs')) or ''
    return [int(x) for x in text.split() if x.isdigit()]


def _apps(module, binary):
    path = module.get_bin_path(binary) if '/' not in binary else (binary if os.access(binary, os.X_OK) else None)
    if not path:
        return []
    rc, out, _err = module.run_command(nsmi.query_apps_argv(path))
    if rc != 0:
        return []
    rc, gpus_out, _err = module.run_command(nsmi.query_gpu_argv(path))
    gpus = nsmi.parse_gpus(gpus_out) if rc == 0 else []
    return nsmi.parse_apps(out, gpus)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            _specs.endpoint_argument_spec(),
            redact_values=redact.argument_spec()['redact_values'],
            service_name=dict(type='str', default='sglang'),
            unit_dir=dict(type='path', default='/etc/systemd/system'),
            env_dir=dict(type='path', default='/etc/llmserve'),
            state_dir=dict(type='path', default='/var/lib/llmserve/sglang'),
            timeout=dict(type='float', default=10),
            nvidia_smi=dict(type='str', default='nvidia-smi'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    values = redact.guard(module, (p['redact_values'] or []) + ([p['api_key']] if p['api_key'] else []))
    name = p['service_name']
    rc, out, err = module.run_command(statuslib.show_argv(name))
    if rc != 0:
        module.fail_json(msg='systemctl show %s.service failed (rc %s): %s' % (name, rc, (err or out).strip()))
    show = _systemd.parse_show(out)
    record_text = _read(os.path.join(p['state_dir'], 'record.json'))
    try:
        record = json.loads(record_text) if record_text else {}
    except ValueError:
        record = {}
    reply = None
    if show.get('ActiveState') == 'active':
        got = sglang_http.get('%s/health' % sglang_http.base_url(p['host'], p['port']), api_key=p['api_key'],
                              timeout=p['timeout'])
        reply = {'status': got.status, 'seconds': round(got.seconds, 3), 'error': got.error}
    result = statuslib.summarize(
        show, _read(os.path.join(p['unit_dir'], '%s.service' % name)),
        _read(os.path.join(p['env_dir'], '%s.env' % name)), record, _apps(module, p['nvidia_smi']),
        _cgroup_pids(show.get('ControlGroup')), reply, values)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
