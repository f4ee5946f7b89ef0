#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_launch
short_description: Render, validate and run an SGLang server as a systemd service
version_added: 0.1.0
description:
  - Builds the C(python -m sglang.launch_server) command line from structured options plus O(extra_args),
    validates it against the flags and choices of the INSTALLED SGLang (O(sglang_options), or read from O(python))
    and against the GPU architecture (which MoE/FP4/attention backends run on O(gpu_arch)), before changing anything.
  - Renders a systemd unit (ExecStart quoted with systemd's own rules) and a 0600 EnvironmentFile that holds O(env)
    and the API key; the unit refers to the key as C(${SGLANG_API_KEY}) only.
  - Writes a file only when its content differs (atomic rename, timestamped backups), runs C(daemon-reload) only
    when the unit changed, then starts, stops or restarts the service (a change of the restart policy alone needs
    no restart).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
  - llmserve.sglang.gpu_free.free_gpus
attributes:
  check_mode:
    support: full
    details: Validates and reports what would change; writes nothing and runs no C(systemctl) that changes state.
  diff_mode:
    support: full
    details: Before and after of the unit file and of the EnvironmentFile (secrets masked).
  platform:
    platforms: posix
    details: Needs systemd.
options:
  service_name:
    description: Name of the systemd service, without C(.service).
    type: str
    required: true
  state:
    description:
      - V(present) writes the unit and env file and leaves the service as it is.
      - V(started) also starts it; when the unit or env file changed and it was running, it is restarted, unless only
        C(Restart=) and C(RestartSec=) changed (O(restart), O(restart_sec)); then C(daemon-reload) applies them to the
        running process, which goes on serving (same RV(invocation_id)).
      - V(restarted) always restarts it. V(stopped) stops it (and writes the files when O(model_path) is given).
      - V(absent) stops and disables it and removes the unit and env file (kept as backups when O(backup=true)).
    type: str
    choices: [started, stopped, restarted, present, absent]
    default: started
  enabled:
    description: Whether the service starts at boot. Left as it is when not set.
    type: bool
  python:
    description: Absolute path of the Python interpreter SGLang is installed in.
    type: path
  model_path:
    description: C(--model-path). Required unless O(state=absent) or O(state=stopped).
    type: str
  served_model_name:
    description: C(--served-model-name); may not contain C(:).
    type: str
  tp_size:
    description:
      - C(--tp-size) (tensor parallel size); at most O(gpu_count).
      - In a multi-node group the total over all nodes, O(gpu_count) per node times O(nnodes) at most.
    type: int
  nnodes:
    description:
      - C(--nnodes), the number of hosts of a multi-node group (every member runs the same flags).
      - Leave unset for one host.
    type: int
  node_rank:
    description: C(--node-rank) of this host in its group; rank 0 serves HTTP. Needs O(nnodes).
    type: int
  dist_init_addr:
    description: C(--dist-init-addr), C(HOST:PORT) of rank 0 where the ranks meet. Needs O(nnodes).
    type: str
  quantization:
    description: C(--quantization), for example V(modelopt_fp4).
    type: str
  moe_runner_backend:
    description: C(--moe-runner-backend), for example V(flashinfer_cutlass).
    type: str
  fp4_gemm_backend:
    description: C(--fp4-gemm-backend), for example V(flashinfer_cudnn).
    type: str
  attention_backend:
    description: C(--attention-backend).
    type: str
  tool_call_parser:
    description: C(--tool-call-parser).
    type: str
  reasoning_parser:
    description: C(--reasoning-parser).
    type: str
  host:
    description: C(--host).
    type: str
  port:
    description: C(--port), 1-65535.
    type: int
  api_key:
    description:
      - C(--api-key). Written only to the 0600 EnvironmentFile as C(SGLANG_API_KEY); ExecStart reads
        C(--api-key ${SGLANG_API_KEY}). Never returned.
      - Where the host's systemd is 253 or newer, the unit also gets a C(LogFilterPatterns=) deny pattern that keeps
        SGLang's start-up line of all its arguments (which holds the key) out of the journal.
    type: str
  env:
    description: Environment variables for the server (names must match C(^[A-Za-z_][A-Za-z0-9_]*$)).
    type: dict
    default: {}
  extra_args:
    description:
      - More SGLang flags, one list item per flag and per value (V(["--mem-fraction-static", "0.85"])) or V(--flag=value).
      - Checked against the installed SGLang like the structured options; the API key may not appear here.
    type: list
    elements: str
    default: []
  disable_custom_all_reduce:
    description: Add C(--disable-custom-all-reduce).
    type: bool
    default: false
  gpu_arch:
    description:
      - GPU arch family (V(sm90), V(sm100), V(sm120)) or compute capability (V(12.0)), for example RV(llmserve.sglang.gpu_info#module:arch).
      - When given, backends that cannot run on it are an error (unless O(force)), known-bad ones a warning.
    type: str
  gpu_count:
    description: Number of GPUs of this host; O(tp_size) may not exceed it.
    type: int
  sglang_options:
    description:
      - The flag table of the installed SGLang, RV(llmserve.sglang.gpu_info#module:sglang.options), or its JSON
        text, RV(llmserve.sglang.gpu_info#module:sglang.options_json) (the deploy passes the text, which Ansible
        templates in one piece).
      - When omitted and O(check_flags=true), the module reads it from O(python) itself.
    type: raw
  sglang_version:
    description: The SGLang version O(sglang_options) came from (named in error messages).
    type: str
  check_flags:
    description: Validate flags and choices against the installed SGLang.
    type: bool
    default: true
  force:
    description: Render and start backends the arch matrix says cannot run on O(gpu_arch) (a warning instead of an error).
    type: bool
    default: false
  unit_dir:
    description: Where the unit file goes.
    type: path
    default: /etc/systemd/system
  env_dir:
    description: Where the EnvironmentFile goes (created 0700).
    type: path
    default: /etc/llmserve
  backup:
    description: Keep a timestamped copy of the previous unit and env file before replacing or removing them.
    type: bool
    default: true
  backup_dir:
    description: Where backups go. Default C(<env_dir>/backup).
    type: path
  backup_keep:
    description: How many backups of each file to keep (oldest removed first).
    type: int
    default: 5
  description:
    description: The unit's C(Description=). Default C(SGLang server <service_name>).
    type: str
  restart:
    description:
      - The unit's C(Restart=) (V(no), V(on-failure), V(on-abnormal), V(on-abort), V(always)).
      - Keep V(no) for trials (a crashing backend must stay down). The deploy's installed service gets the
        C(sglang_restart) role variable, V(on-failure) by default; its trials always get V(no).
      - Quote V("no") in YAML; an unquoted C(no) (false) is accepted too.
      - Changing only O(restart) or O(restart_sec) of a running service with O(state=started) does not restart it
        (see O(state)).
    type: raw
    default: 'no'
  restart_sec:
    description:
      - The unit's C(RestartSec=), seconds between the process's exit and its restart, when O(restart) is not V(no)
        (not written with V(no)). V(0) or more.
    type: int
    default: 10
  timeout_stop_sec:
    description: C(TimeoutStopSec=); after it, what is left of the service gets SIGKILL (C(KillMode=mixed)).
    type: int
    default: 30
  limit_nofile:
    description: C(LimitNOFILE=).
    type: int
    default: 1048576
  working_directory:
    description: C(WorkingDirectory=).
    type: path
    default: /
  user:
    description: C(User=) (root when not set).
    type: str
  free_gpus:
    description:
      - Free the GPUs before the unit starts, in the same call. When a start or restart is due, the unit is stopped
        (C(systemctl stop) for at most O(free_gpus.stop_timeout) seconds, then C(systemctl kill --signal=SIGKILL)),
        the processes that still hold a GPU are ended and the memory is awaited exactly as
        M(llmserve.sglang.gpu_reset) does (same options), and only then is the unit started. RV(actions) then reads
        V(stop), V(free-gpus), V(start) instead of V(restart).
      - When the GPUs are not free in time the module fails and leaves the unit stopped (RV(gpus_freed) says what
        is still held and by whom).
      - For a plain GPU host; a container's GPU holders are found from its Proxmox node (M(llmserve.sglang.gpu_reset)
        with O(llmserve.sglang.gpu_reset#module:vmid) there).
    type: dict
    version_added: 0.2.0
notes:
  - On stop systemd sends SIGTERM to the main process only (C(KillMode=mixed)); SGLang then takes its workers down.
    What is left after O(timeout_stop_sec) gets SIGKILL, so a stop is bounded.
  - Model paths with spaces, quotes, C($) or C(%) are quoted with systemd's rules and reach SGLang unchanged.
seealso:
  - module: llmserve.sglang.gpu_info
  - module: llmserve.sglang.gpu_reset
'''

EXAMPLES = r'''
- name: Trial of one MoE backend (no restart on failure)
  llmserve.sglang.sglang_launch:
    service_name: sglang-trial
    python: /root/ml-env/bin/python3
    model_path: /models/Qwen3.5-397B-A17B-NVFP4
    served_model_name: qwen3.5-397b
    tp_size: 8
    quantization: modelopt_fp4
    moe_runner_backend: flashinfer_cutlass
    fp4_gemm_backend: flashinfer_cudnn
    host: 0.0.0.0
    port: 30000
    api_key: "{{ vault_sglang_api_key }}"
    env:
      NCCL_P2P_LEVEL: SYS
    extra_args: ["--trust-remote-code", "--mem-fraction-static", "0.85"]
    gpu_arch: "{{ gpu.arch }}"
    gpu_count: "{{ gpu.gpu_count }}"
    sglang_options: "{{ gpu.sglang.options }}"
    sglang_version: "{{ gpu.sglang.version }}"
    restart: "no"
    state: restarted
  register: launch

- name: Install the chosen config as the enabled service
  llmserve.sglang.sglang_launch:
    service_name: sglang
    python: /root/ml-env/bin/python3
    model_path: /models/Qwen3.5-397B-A17B-NVFP4
    tp_size: 8
    moe_runner_backend: flashinfer_cutlass
    restart: on-failure
    enabled: true
    state: started

- name: Remove a trial unit
  llmserve.sglang.sglang_launch:
    service_name: sglang-trial
    state: absent
'''

RETURN = r'''
argv:
  description: The command line, one item per argument; the API key appears as C(${SGLANG_API_KEY}).
  returned: when the unit is rendered
  type: list
  elements: str
  sample: ["/root/ml-env/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "8"]
exec_start:
  description: The ExecStart value as written in the unit.
  returned: when the unit is rendered
  type: str
unit_path:
  description: Path of the unit file.
  returned: always
  type: str
  sample: /etc/systemd/system/sglang.service
env_path:
  description: Path of the EnvironmentFile.
  returned: always
  type: str
  sample: /etc/llmserve/sglang.env
backup_files:
  description: Backups written by this run.
  returned: always
  type: list
  elements: str
unit_changed:
  description: Whether the unit file changed (or would).
  returned: always
  type: bool
env_changed:
  description: Whether the EnvironmentFile changed (or would).
  returned: always
  type: bool
log_filter_patterns:
  description:
    - The C(LogFilterPatterns=) the unit carries. With O(api_key) set and systemd 253 or newer on the host, one deny
      pattern that keeps SGLang's start-up argument dump (C(server_args=...), which holds the key) out of the journal;
      empty otherwise (older systemd has no such setting).
  returned: when O(state) is not C(absent)
  type: list
  elements: str
  sample: ['~api_key.:.\x27']
daemon_reloaded:
  description: Whether C(systemctl daemon-reload) ran.
  returned: always
  type: bool
invocation_id:
  description:
    - The unit's C(InvocationID) after the actions (empty when it is not running, and in check mode). The same ID
      as before the call means the same process goes on serving, as nothing restarted it.
  returned: when O(state) is not C(absent)
  type: str
  sample: 6c0a5f4d6b0e4a0e9f1f2f0c2d7e8a11
actions:
  description: The C(systemctl) actions taken (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [daemon-reload, restart]
arch_findings:
  description: What the arch matrix said about the chosen backends on O(gpu_arch) (verdict C(unsupported), C(known_bad) or C(warn)).
  returned: always
  type: list
  elements: dict
errors:
  description: On a validation failure, every problem found, each starting with the option it is about.
  returned: failure
  type: list
  elements: str
error_kinds:
  description:
    - On a validation failure, the kinds of problem in the report's words, in order
      (V(unknown_flag), V(unknown_choice), V(arch_unsupported), V(invalid_input)).
  returned: failure
  type: list
  elements: str
  sample: [unknown_flag, arch_unsupported]
validation_warnings:
  description: Warnings of the validation (known-bad or forced backends, SGLang C(auto) on SM120, repeated flags).
  returned: always
  type: list
  elements: str
sglang_version:
  description: The SGLang version the flags were checked against.
  returned: always
  type: str
unit_stop:
  description: With O(free_gpus), what the stop before the start did (V(stopped), V(killed), V(not_active), V(not_loaded)).
  returned: when O(free_gpus) is set and a start was due
  type: dict
  sample: {unit: sglang.service, before: active, result: stopped, seconds: 0.4}
gpus_freed:
  description:
    - With O(free_gpus), what freeing the GPUs did, as M(llmserve.sglang.gpu_reset) returns it (V(killed), V(spared),
      V(memory_after), V(seconds), ...).
  returned: when O(free_gpus) is set and a start was due
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _launch


def main():
    module = AnsibleModule(argument_spec=_launch.argument_spec(), supports_check_mode=True)
    _launch.run(module)


if __name__ == '__main__':
    main()
