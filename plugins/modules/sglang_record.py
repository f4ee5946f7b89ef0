#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_record
short_description: Add one deploy's trial outcomes to the host's record, atomically
version_added: 0.1.0
description:
  - The record is a JSON file on the GPU host that maps GPU fingerprint + SGLang version + configuration key to
    outcome, reason, evidence and figures. M(llmserve.sglang.sglang_plan) reads it to skip what already failed here.
  - The new record is written to a temporary file in the same directory and renamed over the old one, so a reader
    never sees half a file and an interrupted run leaves the previous record whole.
  - Entries are bounded (the newest 200 are kept).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reports whether the record would change and writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The record file. Its directory is created (0755) when missing.
    type: path
    required: true
  fingerprint:
    description: The GPU fingerprint (M(llmserve.sglang.sglang_plan)'s RV(llmserve.sglang.sglang_plan#module:fingerprint)).
    type: str
    required: true
  gpu:
    description: The GPU summary (V(name), V(compute_cap), V(count)).
    type: dict
    required: true
  sglang_version:
    description: The installed SGLang version.
    type: str
    required: true
  results:
    description:
      - This run's candidates as the report lists them (V(name), V(config_key), V(args), V(outcome), V(reason),
        V(evidence), V(seconds), V(benchmark), V(screen), V(diagnosis)). Only V(ready) and V(failed) ones are recorded,
        with the screen's result and the diagnosis' V(id).
    type: list
    elements: dict
    default: []
  selected:
    description: The candidate now serving (V(name), V(config_key)), if any.
    type: dict
  release_lock:
    description:
      - A directory to remove once the record is written (or found unchanged). This is the run's deploy lock, taken
        by the role C(preflight) and given back in the same call as the record it protects. Its removal is not a change to
        the host (the lock lived only for this run). Nothing is removed in check mode.
    type: path
    version_added: 0.2.0
  lock_owner:
    description:
      - The owner record this run wrote into the lock (M(llmserve.sglang.deploy_lock)'s O(llmserve.sglang.deploy_lock#module:owner)).
        When given, O(release_lock) is removed only while its C(owner.json) still names this run (controller, PID,
        V(since)); a lock another run took over is left to that run.
    type: dict
    version_added: 0.3.0
  trial_marker:
    description:
      - The trials' in-progress marker (written by M(llmserve.sglang.trial_snapshot)) to remove once the record is
        written (the trials are over, and the unit on disk is the one that serves or the one put back). Removing it is
        a change. Nothing is removed in check mode.
    type: path
    version_added: 0.2.0
'''

EXAMPLES = r'''
- name: Remember what worked and what did not
  llmserve.sglang.sglang_record:
    path: /var/lib/llmserve/sglang/record.json
    fingerprint: "{{ plan.fingerprint }}"
    gpu: {name: "{{ gpu.gpu_name }}", compute_cap: "{{ gpu.compute_cap }}", count: "{{ gpu.gpu_count }}"}
    sglang_version: "{{ gpu.sglang.version }}"
    results: "{{ trial_results }}"
    selected: "{{ selected }}"
'''

RETURN = r'''
record:
  description: The record as written.
  returned: success
  type: dict
path:
  description: The record file.
  returned: success
  type: str
  sample: /var/lib/llmserve/sglang/record.json
marker_removed:
  description: Whether O(trial_marker) was there and was removed (in check mode, whether it would be).
  returned: success
  type: bool
'''

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import _files
from ansible_collections.llmserve.sglang.plugins.module_utils import deploy_lock
from ansible_collections.llmserve.sglang.plugins.module_utils import plan as planlib


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            fingerprint=dict(type='str', required=True),
            gpu=dict(type='dict', required=True),
            sglang_version=dict(type='str', required=True),
            results=dict(type='list', elements='dict', default=[]),
            selected=dict(type='dict'),
            release_lock=dict(type='path'),
            lock_owner=dict(type='dict'),
            trial_marker=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    old = {}
    if os.path.exists(p['path']):
        try:
            with open(p['path']) as handle:
                old = json.load(handle)
        except ValueError as exc:
            module.fail_json(msg='path %s is not valid JSON (%s): move it aside; it is kept as is' % (p['path'], exc))
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    new = planlib.merge_record(old, p['fingerprint'], p['gpu'], p['sglang_version'], p['results'], p['selected'], now)
    changed = len(new['entries']) != len((old or {}).get('entries') or []) or new.get('selected') != old.get('selected')
    if changed and not module.check_mode:
        directory = os.path.dirname(p['path'])
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        _files.atomic_write(p['path'], json.dumps(new, indent=1, sort_keys=True), 0o644, module=module)
    marker_removed = bool(p['trial_marker']) and os.path.lexists(p['trial_marker'])
    if marker_removed and not module.check_mode:
        os.unlink(p['trial_marker'])
    if p['release_lock'] and not module.check_mode:
        deploy_lock.release(p['release_lock'], p['lock_owner'])
    module.exit_json(changed=changed or marker_removed, record=new, path=p['path'], marker_removed=marker_removed)


if __name__ == '__main__':
    main()
