# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-task, per-host timings of a playbook run, written as JSON for tests/bench/run.py (P3, P6).

Not part of the collection: enabled only by the bench with
``ANSIBLE_CALLBACK_PLUGINS=tests/bench/callback_plugins ANSIBLE_CALLBACKS_ENABLED=bench_timing``
and ``BENCH_TIMING_FILE=/path/out.json``; it runs beside the normal stdout callback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: bench_timing
type: notification
short_description: write per-task timings to the JSON file named by E(BENCH_TIMING_FILE)
description:
  - Used by tests/bench/run.py only.
requirements:
  - enabled in the configuration (callbacks_enabled)
'''

import json
import os
import resource
import time

from ansible.plugins.callback import CallbackBase

# result fields kept per module (the server's own time is subtracted from the overhead)
KEEP = {
    'await_server_ready': ('status', 'elapsed', 'seconds', 'milestone'),
    'smoke_generate': ('ok', 'seconds'),
    'gpu_reset': ('seconds', 'seconds_to_free'),
    'sglang_launch': ('actions', 'unit_stop'),
    'trial_run': ('runs',),
}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'bench_timing'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.path = os.environ.get('BENCH_TIMING_FILE')
        self.t0 = time.time()
        self.play = None
        self.task_start = {}
        self.host_start = {}
        self.host_cpu0 = {}
        # the lab's per-host cgroups (tests/lab/labctl.py): a task's host CPU is read off its host's cpu.stat
        self.cgroups = os.environ.get('BENCH_HOST_CGROUPS')
        self.plays = []
        self.rows = []

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()
        self.plays.append({'name': self.play, 'start': time.time()})

    def _task_start(self, task):
        self.task_start[task._uuid] = time.time()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def host_cpu(self, host):
        """CPU seconds used so far in the host's lab cgroup (None outside the lab)."""
        if not self.cgroups:
            return None
        try:
            with open(os.path.join(self.cgroups, host, 'cpu.stat')) as f:
                for line in f:
                    if line.startswith('usage_usec '):
                        return int(line.split()[1]) / 1e6
        except (IOError, OSError, ValueError):
            return None
        return None

    def v2_runner_on_start(self, host, task):
        self.host_start[(task._uuid, host.get_name())] = time.time()
        self.host_cpu0[(task._uuid, host.get_name())] = self.host_cpu(host.get_name())

    def _done(self, result, status):
        now = time.time()
        task = result._task
        host = result._host.get_name()
        start = self.host_start.get((task._uuid, host), self.task_start.get(task._uuid, now))
        role = task._role.get_name(include_role_fqcn=False) if task._role else None
        action = (task.action or '').split('.')[-1]
        row = {'play': self.play, 'role': role, 'task': task.get_name(), 'action': action, 'host': host,
               'start': start, 'end': now, 'seconds': now - start, 'status': status}
        cpu0, cpu1 = self.host_cpu0.get((task._uuid, host)), self.host_cpu(host)
        if cpu0 is not None and cpu1 is not None:
            row['host_cpu'] = cpu1 - cpu0
        res = result._result if isinstance(result._result, dict) else {}
        row['result'] = dict((key, res[key]) for key in KEEP.get(action, ()) if key in res)
        self.rows.append(row)

    def v2_runner_on_ok(self, result):
        self._done(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result, 'failed')

    def v2_runner_on_skipped(self, result):
        self._done(result, 'skipped')

    def v2_runner_on_unreachable(self, result):
        self._done(result, 'unreachable')

    def v2_playbook_on_stats(self, stats):
        if not self.path:
            return
        with open(self.path, 'w') as f:
            # this callback runs in ansible-playbook's main process: its own CPU so far (the strategy, the variable
            # manager, the callbacks and the fork of each task's worker), apart from its workers and ssh clients
            own = resource.getrusage(resource.RUSAGE_SELF)
            json.dump({'start': self.t0, 'end': time.time(), 'plays': self.plays, 'tasks': self.rows,
                       'main_cpu': own.ru_utime + own.ru_stime}, f, indent=1)
