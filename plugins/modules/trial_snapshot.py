#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: trial_snapshot
short_description: Keep what served before a deploy's trials, for a rollback, and mark the trials as in progress
version_added: 0.2.0
description:
  - Before the first trial of a deploy, copies the service's unit file and environment file (O(files)) to
    C(<dir>/previous/<name>) (mode 0600, a copy of a file that does not exist is removed) and writes O(state), the
    unit's state before the run, to C(<dir>/previous/state.json); then writes the marker C(<dir>/trial-in-progress).
  - When the marker is already there (a run was interrupted during its trials), the unit on disk is a trial's, so
    the snapshot from before that run is kept and only the marker is written.
  - Every file is written to a temporary file in its directory and renamed, so a reader never sees half a file.
  - The rollback (role C(sglang_service)) restores from this snapshot; the marker is removed once a configuration
    serves or the previous one is back (M(llmserve.sglang.sglang_record) O(llmserve.sglang.sglang_record#module:trial_marker)).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
attributes:
  check_mode:
    support: full
    details: Reports whether anything would change and writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  dir:
    description: The service's state directory (created 0700 when missing).
    type: path
    required: true
  files:
    description: Name (V(unit), V(env)) to path of each file to keep.
    type: dict
    required: true
  state:
    description: What was there before the run (for example the unit's C(systemctl show) properties), kept as JSON.
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Keep the previous unit for a rollback
  llmserve.sglang.trial_snapshot:
    dir: /var/lib/llmserve/sglang
    files:
      unit: /etc/systemd/system/sglang.service
      env: /etc/llmserve/sglang.env
    state: {LoadState: loaded, ActiveState: active, UnitFileState: enabled}
'''

RETURN = r'''
taken:
  description: Whether a snapshot was taken (false when an unfinished trial's marker was found and its snapshot kept).
  returned: success
  type: bool
  sample: true
snapshot_dir:
  description: Where the snapshot is.
  returned: success
  type: str
  sample: /var/lib/llmserve/sglang/previous
saved:
  description: Names of the files copied (those that existed).
  returned: success
  type: list
  elements: str
  sample: [env, unit]
absent:
  description: Names of the files that did not exist (their stale copies are removed).
  returned: success
  type: list
  elements: str
  sample: []
marker:
  description: The marker file.
  returned: success
  type: str
  sample: /var/lib/llmserve/sglang/trial-in-progress
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import snapshot


def main():
    module = AnsibleModule(
        argument_spec=dict(
            redact.argument_spec(),
            dir=dict(type='path', required=True),
            files=dict(type='dict', required=True),
            state=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    redact.guard(module)
    try:
        result = snapshot.take(p['dir'], dict((k, str(v)) for k, v in p['files'].items()), p['state'],
                               check_mode=module.check_mode, module=module)
    except (IOError, OSError) as exc:
        module.fail_json(msg='could not keep the snapshot in %s: %s' % (p['dir'], exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
