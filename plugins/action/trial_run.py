# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmserve.sglang.trial_run: a single host's screens and trials in one task.

The logic is :mod:`plugin_utils.trial_run`; the readiness waits are :mod:`plugin_utils.await_loop`'s, as the
``await_server_ready`` action runs them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmserve.sglang.plugins.filter import diagnose
from ansible_collections.llmserve.sglang.plugins.plugin_utils import await_loop
from ansible_collections.llmserve.sglang.plugins.plugin_utils import trial_run

display = Display()

SPEC = dict(
    planned=dict(type='list', elements='dict', required=True),
    by_name=dict(type='dict', required=True),
    settings=dict(type='dict', required=True),
    launch_defaults=dict(type='dict', required=True),
    free_gpus=dict(type='dict'),
    record=dict(type='raw'),
    fingerprint=dict(type='str'),
    sglang_version=dict(type='str'),
    context=dict(type='dict', default={}),
    redact_values=dict(type='list', elements='str', default=[], no_log=True),
    smoke_timeout=dict(type='int', default=120),
    step=dict(type='int', default=10),
    selected=dict(type='str'),
    last_started=dict(type='str'),
)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # the modules need no files
        task_vars = task_vars or {}
        if self._task.check_mode:
            raise AnsibleActionFail('trial_run starts servers: it does not run in check mode')
        dummy, params = self.validate_argument_spec(argument_spec=SPEC)
        omit = task_vars.get('omit')
        params['launch_defaults'] = dict((k, v) for k, v in (params.get('launch_defaults') or {}).items()
                                         if v is not None and v != omit)
        context = dict(params.get('context') or {})
        if context.get('signatures') is None:
            context['signatures'] = diagnose.with_shipped(context.pop('extra_signatures', None))
        params['context'] = context
        host = task_vars.get('inventory_hostname', '')

        def say(line):
            display.display('%s: %s' % (host, line))

        parent = os.getppid()

        def call(module, args):
            # a worker whose ansible-playbook is gone (killed) starts nothing more: its task runs no further
            if os.getppid() != parent:
                raise AnsibleActionFail('the controller process that ran this task is gone: no further module run')
            return self._execute_module(module_name=module, module_args=args, task_vars=task_vars)

        def wait(args, label):
            every = float(args.get('progress') or 0)

            def step_call(step, cursor):
                module_args = dict(args, step=step)
                if cursor:
                    module_args['cursor'] = cursor
                return call(trial_run.AWAIT, module_args)

            if every <= 0:
                return call(trial_run.AWAIT, args)
            return await_loop.AwaitLoop(step_call, every, say=say, label=label,
                                        limit=float(args.get('timeout') or 1800)).run()

        run = trial_run.TrialRun(params, call, wait, say)
        try:
            out = run.run(params.get('planned') or [])
        except ValueError as e:
            raise AnsibleActionFail(str(e))
        result.update(out, changed=run.changed)
        if run.diffs:
            result['diff'] = run.diffs
        return result
