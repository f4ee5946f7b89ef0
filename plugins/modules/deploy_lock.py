#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: deploy_lock
short_description: Take a host's deploy lock (an atomic mkdir), or say who holds it
version_added: 0.2.0
description:
  - Makes the lock's parent, the service's state directory, with mode 0700 (or sets that mode), then makes O(path)
    with one C(mkdir), which only one run can win, and writes O(owner) to C(<path>/owner.json) (0600, atomically).
  - When O(path) is already there, reads its C(owner.json) and returns it as RV(holder) with the lock's RV(age), and
    RV(taken) is false, so the caller can stop before it changes anything and name the other run.
  - A lock older than O(stale_after) seconds, or one without an owner file for over 60 seconds, is taken over at
    once; any other is taken over only with O(take_over) (the caller has found its holder gone).
  - A takeover has one winner. The run that replaces a lock first creates C(<path>/takeover) exclusively (one of
    any number of racing runs succeeds), renames the old lock aside and makes the new one with C(mkdir); a run that
    lost the race gets RV(taken=false) with the winner as RV(holder).
  - M(llmserve.sglang.sglang_record) O(llmserve.sglang.sglang_record#module:release_lock) gives the lock back at the
    end of the run.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Says whether the lock would be taken and who holds it; makes and writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The lock directory, inside the service's state directory.
    type: path
    required: true
  owner:
    description: Who takes the lock (for example the controller, the C(ansible-playbook) PID, V(since) as a UNIX time, the host).
    type: dict
    required: true
  stale_after:
    description: Take over a lock older than this many seconds (from its owner's V(since), else the directory's mtime).
    type: float
  take_over:
    description: Take the lock over from whoever holds it (the previous holder is kept in the owner file as V(took_over)).
    type: bool
    default: false
  expect_holder:
    description:
      - With O(take_over), the owner record of the run judged gone (the first call's RV(holder)). The lock is taken
        over only while that run still holds it, so a lock another run took over in the meantime is left to it.
    type: dict
    version_added: 0.3.0
'''

EXAMPLES = r'''
- name: Take the deploy lock
  llmserve.sglang.deploy_lock:
    path: /var/lib/llmserve/sglang/deploy.lock
    owner: {controller: awx-1, pid: 4242, since: 1795986656, host: gpu01}
    stale_after: 21600
  register: lock

- name: Stop when another deploy holds it
  ansible.builtin.assert:
    that: lock.taken
    fail_msg: "held by ansible-playbook pid {{ lock.holder.pid }} on {{ lock.holder.controller }}"
'''

RETURN = r'''
taken:
  description: Whether this run holds the lock now (in check mode, whether it would).
  returned: success
  type: bool
  sample: true
holder:
  description: The owner file of the lock that was there (empty when there was none or it could not be read).
  returned: success
  type: dict
  sample: {controller: awx-1, pid: 4242, since: 1795986656, host: gpu01}
age:
  description: Seconds since the lock that was there was taken (null when there was none).
  returned: success
  type: float
  sample: 12.5
stale:
  description: Whether the lock that was there was older than O(stale_after) (or ownerless for over 60 seconds).
  returned: success
  type: bool
took_over:
  description: The holder replaced by this run (null when the lock was free or is not taken).
  returned: success
  type: dict
state_dir:
  description: What was done to the lock's parent directory (V(state_dir_created), V(state_dir_mode_set)); either is a change.
  returned: success
  type: list
  elements: str
  sample: [state_dir_created]
'''

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import deploy_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            owner=dict(type='dict', required=True),
            stale_after=dict(type='float'),
            take_over=dict(type='bool', default=False),
            expect_holder=dict(type='dict'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = deploy_lock.acquire(p['path'], p['owner'], time.time(), stale_after=p['stale_after'],
                                     take_over=p['take_over'], check_mode=module.check_mode, module=module,
                                     expect=p['expect_holder'])
    except deploy_lock.LockError as exc:
        module.fail_json(msg='deploy lock: %s' % exc)
    done = result.pop('done')
    # the state directory is a change when it is made or its mode set; the lock lives only for this run
    module.exit_json(changed=bool(done), state_dir=done, **result)


if __name__ == '__main__':
    main()
