#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_plan
short_description: Build the ordered backend candidate plan for one GPU host, changing nothing
version_added: 0.1.0
description:
  - Takes the user's backend candidates in order, then the known-good configuration, and decides for each one
    whether it is V(planned) or V(skipped), with a reason and the evidence for it.
  - Skips, with reason V(unknown_flag), a candidate whose flags or choices the installed SGLang does not accept
    (checked against the flag table M(llmserve.sglang.gpu_info) read from the installed SGLang itself).
  - Fails instead when a candidate's C(moe_runner_backend), C(fp4_gemm_backend) or C(attention_backend) is a near miss
    of a choice the installed SGLang accepts (a misspelling such as V(flashinfer_cutlas)); the message names the field
    and the closest choice.
  - Skips, with reason V(arch_unsupported), a candidate whose kernels do not exist for the GPU architecture,
    and with V(known_bad) one that has served wrong output on it or that already failed on this host with the
    same GPU and SGLang version (read from the host's record), unless the candidate sets C(force=true).
  - Fails, before anything changes, on bad input; each message names the field and the fix.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  candidates:
    description:
      - The public contract's C(sglang_candidates), in the order they should be tried.
      - Each item has C(name) (unique) and optionally C(moe_runner_backend), C(fp4_gemm_backend),
        C(attention_backend), C(extra_args) (list), C(env) (dict) and C(force) (bool).
    type: list
    elements: raw
    default: []
  known_good:
    description:
      - The configuration to fall back to (the public contract's C(sglang_known_good)); it is planned last
        unless a candidate of the same name is already listed.
    type: dict
    required: true
  base:
    description:
      - The options every candidate shares (model path, tp size, quantization, extra args, env ...).
      - Part of the configuration key, so that a record entry only matches the same configuration.
    type: dict
    default: {}
  base_args:
    description:
      - The argv fragment every candidate shares (the base extra args); checked with each candidate's arguments.
    type: list
    elements: str
    default: []
  gpu:
    description:
      - The GPUs, as M(llmserve.sglang.gpu_info) returns them; keys V(name), V(compute_cap), V(arch),
        V(count) and V(driver_version) are used.
    type: dict
    required: true
  sglang_version:
    description: The installed SGLang version (M(llmserve.sglang.gpu_info)'s RV(llmserve.sglang.gpu_info#module:sglang.version)).
    type: str
    required: true
  sglang_options:
    description:
      - The flag table of the installed SGLang (M(llmserve.sglang.gpu_info)'s
        RV(llmserve.sglang.gpu_info#module:sglang.options)), or its JSON text
        (RV(llmserve.sglang.gpu_info#module:sglang.options_json)).
    type: raw
    required: true
  record_path:
    description: The host's record of earlier trials (JSON). A missing file is an empty record.
    type: path
    required: true
  service_name:
    description:
      - Also read the state of the unit C(<service_name>.service) as it is before the deploy (RV(unit_state)); a
        rollback restores it.
    type: str
    version_added: 0.2.0
  port:
    description:
      - Also list the processes that listen on this TCP port (RV(port_listeners)), so that a port held by another
        program stops the deploy before any change. A port out of 1-65535 is not looked up (nothing listens there).
    type: int
    version_added: 0.2.0
  selection:
    description:
      - How the deploy chooses among ready candidates (the public C(sglang_selection)). It decides which candidates
        must be tried before the configuration that serves now may be kept without a trial (RV(reuse)),
        with V(first_ready) the planned candidates ahead of it, with V(fastest) every other planned candidate.
    type: str
    choices: [first_ready, fastest]
    default: first_ready
    version_added: 0.2.0
'''

EXAMPLES = r'''
- name: Plan the candidates for this host
  llmserve.sglang.sglang_plan:
    candidates:
      - name: trtllm-moe
        moe_runner_backend: flashinfer_trtllm
      - name: cutedsl-moe
        moe_runner_backend: flashinfer_cutedsl
    known_good:
      name: known-good
      moe_runner_backend: flashinfer_cutlass
      fp4_gemm_backend: flashinfer_cudnn
    gpu: "{{ gpu }}"
    sglang_version: "{{ gpu.sglang.version }}"
    sglang_options: "{{ gpu.sglang.options }}"
    record_path: /var/lib/llmserve/sglang/record.json
  register: plan
'''

RETURN = r'''
plan:
  description: One entry per candidate, in trial order.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The candidate's name.
      type: str
    args:
      description: The SGLang arguments the candidate adds.
      type: list
      elements: str
    config_key:
      description: Stable key of the configuration (what the record is keyed by).
      type: str
    outcome:
      description: V(planned) or V(skipped).
      type: str
    reason:
      description: Why it was skipped (V(arch_unsupported), V(unknown_flag), V(known_bad)), else V(null).
      type: str
    evidence:
      description: The fact behind the reason.
      type: str
    known_good:
      description: Whether this is the known-good fallback.
      type: bool
  sample:
    - name: trtllm-moe
      args: [--moe-runner-backend, flashinfer_trtllm]
      config_key: 3f1d0c2b9a8e7f60
      outcome: skipped
      reason: arch_unsupported
      evidence: "--moe-runner-backend flashinfer_trtllm on sm120: ships kernels for SM100 only"
      known_good: false
fingerprint:
  description: The GPU fingerprint the record is keyed by (model, compute capability, count, driver).
  returned: success
  type: str
  sample: "NVIDIA RTX PRO 6000 Blackwell Server Edition|cc12.0|x8|drv580.159.04"
record:
  description: The record as read from O(record_path) (empty when absent).
  returned: success
  type: dict
planned:
  description: Names of the candidates that will be tried, in order.
  returned: success
  type: list
  elements: str
reuse:
  description:
    - Whether the configuration that serves now may be kept without a trial.
    - V(recorded) is the planned candidate the record says serves on this host with these GPUs and this SGLang version
      (V(null) when none does), V(blocked_by) the planned candidates that must be tried first, each with V(why), one
      ahead of it (any other one with O(selection=fastest)) that this host never tried with these GPUs and this SGLang,
      that was ready before and is now ahead of it, or that is marked C(force). Keep it only when V(recorded) is set
      and V(blocked_by) is empty.
  returned: success
  type: dict
  sample: {recorded: known-good, blocked_by: [{name: triton-moe, why: "never tried on this host with these GPUs and sglang 0.5.23"}]}
unit_state:
  description: C(systemctl show) of the unit (V(LoadState), V(ActiveState), V(UnitFileState), V(FragmentPath)).
  returned: when O(service_name) is set
  type: dict
  sample: {LoadState: loaded, ActiveState: active, UnitFileState: enabled, FragmentPath: /etc/systemd/system/sglang.service}
port_listeners:
  description: The processes listening on O(port), each with its C(/proc/<pid>/cgroup) (null when it could not be read).
  returned: when O(port) is set
  type: list
  elements: dict
  sample: [{pid: 812, cgroup: "0::/system.slice/sglang.service"}]
port_ss:
  description: The lines C(ss -H -l -t -n -p 'sport = :PORT') printed.
  returned: when O(port) is set
  type: list
  elements: str
'''

import difflib
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import arch_matrix, plan as planlib, sglang_flags


def read_record(path):
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        try:
            data = json.load(handle)
        except ValueError as exc:
            raise planlib.PlanError('record_path %s is not valid JSON (%s): move it aside and run again' % (path, exc))
    return data if isinstance(data, dict) else {}


def misspelt_backend(candidates, result, table):
    """A user candidate's backend value that is a near miss of one the installed SGLang accepts, else None.

    A value with no close match (a backend of another SGLang release) stays a skip with reason unknown_flag;
    a misspelling is an input error and stops the deploy before any change.
    """
    for index, entry in enumerate(result):
        if entry['known_good'] or entry['reason'] != 'unknown_flag' or index >= len(candidates or []):
            continue
        for key, flag in planlib.BACKEND_FLAGS:
            value = entry.get(key)
            option = table.get(flag)
            if not value or option is None or not option.get('choices'):
                continue
            choices = [str(c) for c in option['choices']]
            if str(value) not in choices and difflib.get_close_matches(str(value), choices, n=1, cutoff=0.8):
                return ('%s; fix the spelling of sglang_candidates[%d].%s (nothing was changed)'
                        % (table.bad_choice_message(flag, value, 'sglang_candidates[%d].%s' % (index, key)), index, key))
    return None


def run_checked(module, argv):
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg='%s failed (rc %s): %s' % (' '.join(argv), rc, (err or out).strip()), rc=rc)
    return out


def read_host(module, service_name, port):
    """What the plan's callers need from the host as it is now: the unit's state, the port's listeners."""
    out = {}
    if service_name:
        argv = _systemd.show_argv('%s.service' % service_name, ('LoadState', 'ActiveState', 'UnitFileState', 'FragmentPath'))
        text = run_checked(module, argv)
        out['unit_state'] = _systemd.parse_show(text)
    if port is not None:
        out['port_listeners'], out['port_ss'] = [], []
        if not 0 < port < 65536:
            return out  # out of range: the launch's validation names it
        text = run_checked(module, ['ss', '-H', '-l', '-t', '-n', '-p', 'sport = :%d' % port])
        listeners = []
        for pid in sorted(set(int(x) for x in re.findall(r'pid=([0-9]+)', text))):
            try:
                with open('/proc/%d/cgroup' % pid) as handle:
                    cgroup = handle.read()
            except (IOError, OSError):
                cgroup = None
            listeners.append({'pid': pid, 'cgroup': cgroup})
        out['port_listeners'] = listeners
        out['port_ss'] = [line for line in text.splitlines() if line.strip()]
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            candidates=dict(type='list', elements='raw', default=[]),
            known_good=dict(type='dict', required=True),
            base=dict(type='dict', default={}),
            base_args=dict(type='list', elements='str', default=[]),
            gpu=dict(type='dict', required=True),
            sglang_version=dict(type='str', required=True),
            sglang_options=dict(type='raw', required=True),
            record_path=dict(type='path', required=True),
            service_name=dict(type='str'),
            port=dict(type='int'),
            selection=dict(type='str', default='first_ready', choices=['first_ready', 'fastest']),
        ),
        supports_check_mode=True,
    )
    p = module.params
    options, error = sglang_flags.load_options(p['sglang_options'])
    if error:
        module.fail_json(msg='sglang_options: %s' % error)
    table = sglang_flags.FlagTable(options, p['sglang_version'])

    def flag_check(args):
        _items, errors = sglang_flags.parse_extra_args(list(p['base_args']) + list(args), table, option_name='args')
        return errors

    def arch_check(flag, value, arch):
        result = arch_matrix.classify(flag, value, arch)
        verdict = result['verdict']
        return ('ok' if verdict in ('ok', 'warn') else verdict), result['reason']

    try:
        candidates = planlib.normalize_candidates(p['candidates'], p['known_good'])
        record = read_record(p['record_path'])
        result = planlib.build_plan(candidates, p['base'], p['gpu'], p['sglang_version'], record,
                                    arch_check, flag_check, base_args=p['base_args'])
    except planlib.PlanError as exc:
        module.fail_json(msg=str(exc))
    typo = misspelt_backend(p['candidates'], result, table)
    if typo:
        module.fail_json(msg=typo, plan=result)
    kg = [c for c in result if c['known_good']]
    if kg and kg[0]['outcome'] == 'skipped' and kg[0]['reason'] == 'unknown_flag':
        module.fail_json(msg='sglang_known_good: the installed sglang %s does not accept it: %s; fix sglang_known_good '
                             'or sglang_extra_args' % (p['sglang_version'], kg[0]['evidence']), plan=result)
    fingerprint = planlib.gpu_fingerprint(p['gpu'])
    module.exit_json(changed=False, plan=result, record=record, fingerprint=fingerprint,
                     reuse=planlib.reuse_check(result, record, fingerprint, p['sglang_version'], p['selection']),
                     planned=[c['name'] for c in result if c['outcome'] == 'planned'],
                     **read_host(module, p['service_name'], p['port']))


if __name__ == '__main__':
    main()
