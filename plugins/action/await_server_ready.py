# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmserve.sglang.await_server_ready: the whole wait in one task, with progress lines.

Without O(progress) the module runs once, as any module. With it, the plugin calls the module again and again,
passing back its cursor, until the status is no longer C(loading), and prints a progress line on the controller
every O(progress) seconds. One task however long the load: the controller's cost does not grow with nesting.
The waiting itself is in :mod:`plugin_utils.await_loop`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmserve.sglang.plugins.plugin_utils import await_loop

display = Display()

MODULE = 'llmserve.sglang.await_server_ready'


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # the module needs no files
        args = dict(self._task.args)
        every = float(args.get('progress', 0) or 0)  # the module gets it too: a call returns on a new milestone
        label = args.pop('progress_label', None)
        group = args.pop('group', None)
        first_cursor = args.pop('cursor', None)
        host = task_vars.get('inventory_hostname', '') if task_vars else ''

        def call(step, cursor):
            module_args = dict(args, step=step)
            if cursor:
                module_args['cursor'] = cursor
            return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

        call_step = float(args.pop('step', 0) or 0) if every > 0 else 0
        if every <= 0 or self._task.check_mode:
            if first_cursor:
                args['cursor'] = first_cursor
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        label = label or args.get('service_name') or 'server'
        shared = await_loop.GroupBoard(C.DEFAULT_LOCAL_TMP, group, host, key=label) if group else None
        loop = await_loop.AwaitLoop(call, every, shared=shared, first_cursor=first_cursor, label=label,
                                    say=lambda line: display.display('%s: %s' % (host, line)),
                                    limit=float(args.get('timeout') or 1800), call_step=call_step)
        result.update(loop.run())
        return result
