#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_info
short_description: Facts about the NVIDIA GPUs, their processes and the installed SGLang
version_added: 0.1.0
description:
  - Reads the GPUs (index, name, UUID, bus id, compute capability and arch family, memory, power, utilisation),
    the driver and CUDA versions and the GPU compute processes with C(nvidia-smi), in three calls
    (one C(--query-gpu), one C(--query-compute-apps), the plain table for the CUDA version).
  - On a Proxmox VE node, maps every GPU process to the container (vmid) it belongs to, from C(/proc/<pid>/cgroup).
  - With O(sglang_python), asks the installed SGLang for its version and every flag and choice its own parser
    accepts (C(ServerArgs.add_cli_args)), falling back to parsing C(python -m sglang.launch_server --help).
  - Changes nothing.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.attributes.nvidia_smi
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  sglang_python:
    description:
      - Absolute path of the Python interpreter SGLang is installed in (for example V(/root/ml-env/bin/python3)).
      - When omitted, RV(sglang) is not gathered (RV(sglang.installed) is V(null)).
    type: path
  option_help:
    description:
      - Keep each option's C(help) text in RV(sglang.options).
      - The help texts are about half of the table; a caller that only validates flags and choices (the deploy passes
        the table to every M(llmserve.sglang.sglang_launch) call) sets V(false) and gets C(help) as V(null), or sets
        O(compact_options).
    type: bool
    default: true
    version_added: 0.2.0
  compact_options:
    description:
      - Keep of each option in RV(sglang.options) only what flag validation reads (C(flags), C(dest), and C(type),
        C(nargs), C(choices) where set), with no help and no defaults. Validation against it gives the same errors and
        warnings; it is under 60 % of the table without help texts.
      - The deploy sets V(true), as the table goes to M(llmserve.sglang.sglang_plan) and to every
        M(llmserve.sglang.sglang_launch) call.
    type: bool
    default: false
    version_added: 0.2.0
  options_json:
    description:
      - Return the flag table as one JSON text, RV(sglang.options_json), and leave RV(sglang.options) empty.
      - Ansible templates a string in one piece but a list of 500 dicts item by item, about 0.1 s of controller CPU
        for every task that passes the table on; M(llmserve.sglang.sglang_plan) and M(llmserve.sglang.sglang_launch)
        take either form.
    type: bool
    default: false
    version_added: 0.2.0
  proxmox:
    description:
      - Map GPU processes to Proxmox VE containers through C(/proc/<pid>/cgroup).
      - V(auto) maps whatever PIDs have a C(0::/lxc/<vmid>/) cgroup; V(never) skips the mapping;
        V(always) also reports RV(proxmox_node=true) on a host without C(/etc/pve).
    type: str
    choices: [auto, always, never]
    default: auto
notes:
  - Inside an LXC container C(nvidia-smi) lists no processes (the driver reports node PIDs), while memory use is
    still shown; use M(llmserve.sglang.gpu_reset) there, which also looks at the device nodes.
seealso:
  - module: llmserve.sglang.gpu_reset
  - module: llmserve.sglang.sglang_launch
'''

EXAMPLES = r'''
- name: Read GPUs and the installed SGLang
  llmserve.sglang.gpu_info:
    sglang_python: /root/ml-env/bin/python3
  register: gpu

- name: Stop on a mixed or unexpected machine
  ansible.builtin.assert:
    that:
      - gpu.gpu_count >= 8
      - gpu.arch == 'sm120'
      - gpu.sglang.installed

- name: Pass the flag table on to sglang_launch (no second introspection)
  llmserve.sglang.sglang_launch:
    service_name: sglang
    python: /root/ml-env/bin/python3
    model_path: /models/Qwen3.5-397B-A17B-NVFP4
    tp_size: 8
    gpu_arch: "{{ gpu.arch }}"
    gpu_count: "{{ gpu.gpu_count }}"
    sglang_options: "{{ gpu.sglang.options }}"
'''

RETURN = r'''
gpus:
  description: One entry per GPU, sorted by index.
  returned: success
  type: list
  elements: dict
  contains:
    index: {description: GPU index., type: int, sample: 0}
    name: {description: Product name., type: str, sample: NVIDIA H200}
    uuid: {description: GPU UUID., type: str, sample: GPU-a4fbce9b-25f7-f038-11e1-b07ee93c4d63}
    bus_id: {description: PCI bus id., type: str, sample: "00000000:00:06.0"}
    compute_cap: {description: Compute capability., type: str, sample: "9.0"}
    arch: {description: "Arch family: sm90 Hopper, sm100 datacenter Blackwell, sm120 workstation Blackwell.", type: str, sample: sm90}
    driver_version: {description: Driver version., type: str, sample: 580.159.04}
    memory_used_mib: {description: Memory in use (MiB)., type: int, sample: 21265}
    memory_total_mib: {description: Memory size (MiB)., type: int, sample: 143771}
    power_draw_w: {description: Power draw (W); null when not reported., type: float, sample: 120.3}
    power_limit_w: {description: Power limit (W); null when not reported., type: float, sample: 700.0}
    utilization_pct: {description: GPU utilisation (percent); null when not reported., type: int, sample: 0}
gpu_count:
  description: Number of GPUs.
  returned: success
  type: int
  sample: 8
gpu_name:
  description: Name of GPU 0.
  returned: success
  type: str
  sample: NVIDIA H200
compute_cap:
  description: Compute capability of GPU 0.
  returned: success
  type: str
  sample: "9.0"
arch:
  description: Arch family of GPU 0.
  returned: success
  type: str
  sample: sm90
mixed:
  description: Whether the GPUs differ in name or compute capability.
  returned: success
  type: bool
  sample: false
driver_version:
  description: NVIDIA driver version.
  returned: success
  type: str
  sample: 580.159.04
cuda_version:
  description: The CUDA version the driver supports (from the C(nvidia-smi) header); null when not printed.
  returned: success
  type: str
  sample: "13.0"
processes:
  description: GPU compute processes as C(nvidia-smi) reports them (node PIDs).
  returned: success
  type: list
  elements: dict
  contains:
    pid: {description: Process id (on the node)., type: int, sample: 419}
    name: {description: Process name., type: str, sample: python3}
    used_mib: {description: GPU memory the process holds (MiB)., type: int, sample: 21256}
    gpu_uuid: {description: UUID of the GPU., type: str}
    gpu_bus_id: {description: Bus id of the GPU., type: str}
    gpu_index: {description: Index of the GPU., type: int, sample: 0}
    vmid: {description: Proxmox container the process belongs to; null for the node's own., type: int, sample: 129}
proxmox_node:
  description: Whether this host looks like a Proxmox VE node (C(/etc/pve) or C(pct) present, or a process mapped to a container).
  returned: success
  type: bool
container:
  description: Whether this host is itself a container.
  returned: success
  type: bool
sglang:
  description: The installed SGLang, read from SGLang itself.
  returned: success
  type: dict
  contains:
    installed: {description: Whether C(import sglang) worked; null when O(sglang_python) was not given., type: bool}
    version: {description: SGLang version., type: str, sample: 0.5.23}
    python: {description: The interpreter asked., type: str, sample: /root/ml-env/bin/python3}
    python_version: {description: Its Python version., type: str, sample: 3.12.3}
    source: {description: Where the flag table came from., type: str, sample: sglang.srt.server_args.ServerArgs.add_cli_args}
    error: {description: Why something could not be read; null when all went well., type: str}
    options:
      description: Every option SGLang's parser accepts (schema of C(tests/data/sglang/server-args-0.5.23.json)).
      type: list
      elements: dict
      sample: [{flags: ["--tp-size", "--tensor-parallel-size"], dest: tp_size, type: int, nargs: null,
                takes_value: true, choices: null, default: 1, help: The tensor parallelism size.}]
    option_count: {description: How many options the table has (0 when it could not be read)., type: int, sample: 532}
    hf_found:
      description:
        - Whether the C(hf) command of huggingface_hub is beside O(sglang_python) (SGLang's venv, where
          P(llmserve.sglang.model_download#module) runs it); null when O(sglang_python) was not given.
      type: bool
    options_json:
      description: With O(options_json), the table as JSON text (and RV(sglang.options) is empty).
      type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _gpu_info


def main():
    module = AnsibleModule(argument_spec=_gpu_info.argument_spec(), supports_check_mode=True)
    _gpu_info.run(module)


if __name__ == '__main__':
    main()
