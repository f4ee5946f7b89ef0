# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmserve.sglang.report_files: writes on the controller itself, no module is run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.llmserve.sglang.plugins.plugin_utils import controller_files


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('dest', 'files', 'mode'))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no remote files
        dummy, args = self.validate_argument_spec(argument_spec=dict(
            dest=dict(type='path', required=True),
            files=dict(type='dict', required=True),
            mode=dict(type='raw', default='0644'),
        ))
        mode = args['mode']
        try:
            mode = int(mode, 8) if isinstance(mode, str) else int(mode)
        except ValueError:
            raise AnsibleActionFail('mode %r is not an octal mode such as 0644' % (args['mode'],))
        dest = os.path.abspath(os.path.expanduser(args['dest']))
        try:
            out = controller_files.write_files(dest, args['files'], mode=mode, check_mode=self._task.check_mode)
        except (ValueError, IOError, OSError) as exc:
            raise AnsibleActionFail('could not write the files in %s: %s' % (dest, exc))
        result.update(changed=bool(out['changed'] or out['created_dir']), dest=dest,
                      written=out['changed'], unchanged=out['unchanged'])
        return result
