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
    suboptions:
      gpus:
        description:
          - The GPUs to free, indices or GPU UUIDs (the service's C(sglang_gpus)); default all. Only holders of these
            GPUs alone, and not in another system service, are ended (see M(llmserve.sglang.gpu_reset)'s
            O(llmserve.sglang.gpu_reset#module:gpus)).
        type: list
        elements: str
      stop_timeout:
        description: Seconds the stop may take before the unit is killed.
        type: float
        default: 60
      kill_unit:
        description:
          - Kill the unit with SIGKILL first, then stop it. For a unit whose server already failed (nothing to drain;
            SGLang's own clean-up after a crash ignores SIGTERM for up to a minute).
        type: bool
        default: false
      protected_pids:
        description: PIDs never to signal.
        type: list
        elements: int
        default: []
      protected_names:
        description: Process names never to signal, added to the built-in list.
        type: list
        elements: str
        default: []
      default_protected:
        description: Also protect the built-in names (C(systemd), C(sshd), C(nvidia-persistenced), ...).
        type: bool
        default: true
      term_grace:
        description: Seconds between SIGTERM and SIGKILL.
        type: float
        default: 5
      timeout:
        description: Seconds the freeing may take, memory wait included.
        type: float
        default: 30
      memory_threshold_mib:
        description: A GPU counts as free when its used memory is below this (MiB).
        type: int
        default: 1024
      hard_reset:
        description: Run C(nvidia-smi --gpu-reset) on GPUs still held at the end (never on shared machines).
        type: bool
        default: false
      nvidia_smi:
        description: Name or path of C(nvidia-smi).
        type: str
        default: nvidia-smi
      fuser:
        description: Name or path of C(fuser); without it C(/proc/*/fd) is scanned.
        type: str
        default: fuser
      devices:
        description: Shell glob of the GPU device nodes.
        type: str
        default: /dev/nvidia*
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

import datetime
import errno
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_free
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit


def read_text(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8')
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def atomic_write(path, content, mode):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        os.fchmod(fd, mode)
        os.write(fd, to_bytes(content))
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.rename(tmp, path)
    finally:
        if fd is not None:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)


def make_backup(path, backup_dir, keep, stamp):
    if not os.path.exists(path):
        return None
    if not os.path.isdir(backup_dir):
        os.makedirs(backup_dir, 0o700)
    base = os.path.basename(path)
    target = os.path.join(backup_dir, '%s.%s' % (base, stamp))
    content = read_text(path)
    atomic_write(target, content, 0o600)
    olds = sorted(name for name in os.listdir(backup_dir) if name.startswith(base + '.') and not name.startswith('.'))
    for name in olds[:max(0, len(olds) - keep)]:
        os.unlink(os.path.join(backup_dir, name))
    return target


class Systemctl(object):
    def __init__(self, module):
        self.module = module
        self.bin = module.get_bin_path('systemctl', required=True)

    def query(self, *args):
        rc, out, dummy = self.module.run_command([self.bin] + list(args))
        return rc, out.strip()

    def do(self, *args):
        rc, out, err = self.module.run_command([self.bin] + list(args))
        if rc != 0:
            self.module.fail_json(msg='systemctl %s failed (rc=%s): %s' % (' '.join(args), rc, (err or out).strip()),
                                  rc=rc, stdout=out, stderr=err)

    def is_active(self, unit):
        rc, out = self.query('is-active', unit)
        return out in ('active', 'activating', 'reloading')

    def is_enabled(self, unit):
        rc, out = self.query('is-enabled', unit)
        return out in ('enabled', 'enabled-runtime', 'linked', 'alias')

    def version(self):
        """systemd's major version (read-only, also in check mode), or None when it cannot be read."""
        rc, out = self.query('--version')
        return systemd_unit.systemd_version(out) if rc == 0 else None

    def invocation_id(self, unit):
        rc, out = self.query('show', '--property=InvocationID', '--value', unit)
        return out if rc == 0 else ''


def fail_errors(module, errors, **kwargs):
    msg = 'sglang_launch: %d problem%s, nothing changed: %s' % (len(errors), '' if len(errors) == 1 else 's', '; '.join(errors))
    module.fail_json(msg=msg, errors=errors, error_kinds=sglang_flags.error_kinds(errors), **kwargs)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            redact.argument_spec(),
            service_name=dict(type='str', required=True),
            state=dict(type='str', default='started', choices=['started', 'stopped', 'restarted', 'present', 'absent']),
            enabled=dict(type='bool'),
            python=dict(type='path'),
            model_path=dict(type='str'),
            served_model_name=dict(type='str'),
            tp_size=dict(type='int'),
            nnodes=dict(type='int'),
            node_rank=dict(type='int'),
            dist_init_addr=dict(type='str'),
            quantization=dict(type='str'),
            moe_runner_backend=dict(type='str'),
            fp4_gemm_backend=dict(type='str'),
            attention_backend=dict(type='str'),
            tool_call_parser=dict(type='str'),
            reasoning_parser=dict(type='str'),
            host=dict(type='str'),
            port=dict(type='int'),
            api_key=dict(type='str', no_log=True),
            env=dict(type='dict', default={}),
            extra_args=dict(type='list', elements='str', default=[]),
            disable_custom_all_reduce=dict(type='bool', default=False),
            gpu_arch=dict(type='str'),
            gpu_count=dict(type='int'),
            sglang_options=dict(type='raw'),
            sglang_version=dict(type='str'),
            check_flags=dict(type='bool', default=True),
            force=dict(type='bool', default=False),
            unit_dir=dict(type='path', default='/etc/systemd/system'),
            env_dir=dict(type='path', default='/etc/llmserve'),
            backup=dict(type='bool', default=True),
            backup_dir=dict(type='path'),
            backup_keep=dict(type='int', default=5),
            description=dict(type='str'),
            restart=dict(type='raw', default='no'),
            restart_sec=dict(type='int', default=10),
            timeout_stop_sec=dict(type='int', default=30),
            limit_nofile=dict(type='int', default=1048576),
            working_directory=dict(type='path', default='/'),
            user=dict(type='str'),
            free_gpus=dict(type='dict', options=gpu_free.argument_spec()),
        ),
        supports_check_mode=True,
    )
    p = module.params
    redact.guard(module)
    name = p['service_name']
    unit_name = '%s.service' % name
    unit_path = os.path.join(p['unit_dir'], unit_name)
    env_path = os.path.join(p['env_dir'], '%s.env' % name)
    backup_dir = p['backup_dir'] or os.path.join(p['env_dir'], 'backup')
    result = dict(changed=False, unit_path=unit_path, env_path=env_path, backup_files=[], unit_changed=False,
                  env_changed=False, daemon_reloaded=False, actions=[], arch_findings=[], validation_warnings=[],
                  sglang_version=p['sglang_version'])

    # ---- validation: everything before any change
    errors = []
    name_error = systemd_unit.validate_service_name(name)
    if name_error:
        fail_errors(module, [name_error], **result)
    restart = systemd_unit.normalize_restart(p['restart'])
    if restart not in systemd_unit.RESTART_CHOICES:
        errors.append('restart: %r is not one of %s' % (restart, ', '.join(systemd_unit.RESTART_CHOICES)))
    if p['backup_keep'] < 1:
        errors.append('backup_keep: must be 1 or more')
    if p['restart_sec'] < 0:
        errors.append('restart_sec: must be 0 or more (seconds before a restart)')
    if p['timeout_stop_sec'] < 1:
        errors.append('timeout_stop_sec: must be 1 or more (a stop must be bounded)')
    free = p['free_gpus']
    bounds = gpu_free.bounds_error(free) if free is not None else None
    if bounds:
        errors.append('free_gpus: %s' % bounds)
    # stopped without model_path: only stop; absent: only remove
    render = p['state'] != 'absent' and (p['state'] != 'stopped' or p['model_path'] is not None)
    if render:
        errors.extend(systemd_unit.validate_env(p['env'], reserved=(sglang_flags.API_KEY_ENV,)))
        table = None
        python_ok = bool(p['python']) and p['python'].startswith('/')  # else sglang_flags.validate names it
        if p['check_flags'] and python_ok:
            options, options_error = sglang_flags.load_options(p['sglang_options'])
            if options_error:
                errors.append('sglang_options: %s' % options_error)
            elif options:
                table = sglang_flags.FlagTable(options, p['sglang_version'])
            else:
                installed = sglang_flags.read_installed(module.run_command, p['python'])
                if not installed['options']:
                    errors.append('sglang_options: could not read the flags of the installed SGLang from %s (%s); '
                                  'pass sglang_options from gpu_info, fix python, or set check_flags=false'
                                  % (p['python'], installed['error']))
                else:
                    table = sglang_flags.FlagTable(installed['options'], installed['version'])
                    result['sglang_version'] = installed['version']
        checked = sglang_flags.validate(p, table, arch=p['gpu_arch'], gpu_count=p['gpu_count'], force=p['force'],
                                        check_flags=p['check_flags'])
        errors.extend(checked['errors'])
        for warning in checked['warnings']:
            module.warn(warning)
        result['validation_warnings'] = checked['warnings']
        result['arch_findings'] = checked['arch_findings']
    if errors:
        fail_errors(module, errors, **result)

    # ---- render and compare
    unit_before = read_text(unit_path)
    env_before = read_text(env_path)
    unit_after = env_after = None
    systemctl = Systemctl(module)
    if render:
        argv = sglang_flags.build_argv(p)
        result['log_filter_patterns'] = systemd_unit.log_filter_patterns(systemctl.version(), bool(p['api_key']))
        try:
            unit_after = systemd_unit.render_unit(
                argv, name, env_path, description=p['description'], restart=restart, restart_sec=p['restart_sec'],
                timeout_stop_sec=p['timeout_stop_sec'], limit_nofile=p['limit_nofile'],
                working_directory=p['working_directory'], user=p['user'],
                log_filter_patterns=result['log_filter_patterns'])
            env_after = systemd_unit.render_env_file(p['env'], api_key=p['api_key'])
        except systemd_unit.UnitError as exc:
            fail_errors(module, ['extra_args/model_path: %s' % to_native(exc)], **result)
        result['argv'] = sglang_flags.display_argv(argv)
        result['exec_start'] = systemd_unit.render_exec_start(argv)
        result['unit_changed'] = unit_before != unit_after
        result['env_changed'] = env_before != env_after
    else:
        result['unit_changed'] = p['state'] == 'absent' and unit_before is not None
        result['env_changed'] = p['state'] == 'absent' and env_before is not None

    if module._diff:
        masked_before = None
        if env_before is not None:
            masked_before = systemd_unit.render_env_file(systemd_unit.parse_env_file(env_before), mask=True)
        masked_after = None
        if env_after is not None:
            masked_after = systemd_unit.render_env_file(p['env'], api_key=p['api_key'], mask=True)
        result['diff'] = [
            dict(before_header=unit_path, after_header=unit_path, before=unit_before or '', after=unit_after or ''),
            dict(before_header=env_path, after_header=env_path, before=masked_before or '', after=masked_after or ''),
        ]

    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S.%f')
    changed = result['unit_changed'] or result['env_changed']
    actions = result['actions']

    def backup_of(path):
        if p['backup'] and not module.check_mode:
            made = make_backup(path, backup_dir, p['backup_keep'], stamp)
            if made:
                result['backup_files'].append(made)

    if p['state'] == 'absent':
        if unit_before is not None or env_before is not None:
            if systemctl.is_active(unit_name):
                actions.append('stop')
            if systemctl.is_enabled(unit_name):
                actions.append('disable')
            actions.append('daemon-reload')
        if not module.check_mode:
            for action in actions:
                if action != 'daemon-reload':
                    systemctl.do(action, unit_name)
            for path, before in ((unit_path, unit_before), (env_path, env_before)):
                if before is not None:
                    backup_of(path)
                    os.unlink(path)
            if 'daemon-reload' in actions:
                systemctl.do('daemon-reload')
                result['daemon_reloaded'] = True
        result['changed'] = bool(actions)
        module.exit_json(**result)

    if not module.check_mode:
        if result['env_changed']:
            if not os.path.isdir(p['env_dir']):
                os.makedirs(p['env_dir'], 0o700)
            backup_of(env_path)
            atomic_write(env_path, env_after, 0o600)
        if result['unit_changed']:
            if not os.path.isdir(p['unit_dir']):
                os.makedirs(p['unit_dir'], 0o755)
            backup_of(unit_path)
            atomic_write(unit_path, unit_after, 0o644)
    if result['unit_changed']:
        actions.append('daemon-reload')
        if not module.check_mode:
            systemctl.do('daemon-reload')
            result['daemon_reloaded'] = True

    if p['enabled'] is not None:
        if p['enabled'] != systemctl.is_enabled(unit_name):
            actions.append('enable' if p['enabled'] else 'disable')

    active = systemctl.is_active(unit_name)
    if p['state'] == 'started':
        if not active:
            actions.append('start')
        elif result['env_changed'] or systemd_unit.unit_change(unit_before, unit_after) == 'restart':
            actions.append('restart')  # a change of Restart=/RestartSec= only: the daemon-reload above applies it
    elif p['state'] == 'restarted':
        actions.append('restart')
    elif p['state'] == 'stopped' and active:
        actions.append('stop')
    if free is not None and ('start' in actions or 'restart' in actions):
        # stop (bounded), free the GPUs, then start: a restart in three steps
        actions[:] = [a for a in actions if a not in ('start', 'restart')] + ['stop', 'free-gpus', 'start']

    if not module.check_mode:
        for action in actions:
            if action == 'daemon-reload':
                continue
            if free is not None and action == 'stop':
                try:
                    result['unit_stop'] = gpu_holders.stop_unit(module.run_command, unit_name, free['stop_timeout'],
                                                                kill=free.get('kill_unit'))
                except RuntimeError as exc:
                    module.fail_json(msg='free_gpus: %s' % exc, **result)
            elif action == 'free-gpus':
                try:
                    ok, freed, msg = gpu_free.free(module.run_command,
                                                   lambda binary, dirs: module.get_bin_path(binary, opt_dirs=dirs),
                                                   free, warn=module.warn, own_unit=unit_name)
                except gpu_free.FreeError as exc:
                    module.fail_json(msg='free_gpus: %s' % exc.msg, **result)
                result['gpus_freed'] = freed
                if not ok:
                    result['changed'] = True
                    module.fail_json(msg='free_gpus: the unit is stopped and not started: %s' % msg, **result)
            else:
                systemctl.do(action, unit_name)
    result['invocation_id'] = '' if module.check_mode else systemctl.invocation_id(unit_name)
    result['changed'] = changed or bool([a for a in actions if a != 'daemon-reload'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
