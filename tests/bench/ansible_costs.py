#!/usr/bin/env python
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-playbook, recording what each task's worker cost the controller (the split under the bench's P3c).

  python tests/bench/ansible_costs.py OUT.jsonl PLAYBOOK [ansible-playbook arguments...]

Ansible runs each task on each host in a worker forked from ansible-playbook's own process. Each worker appends one
JSON line to OUT.jsonl when it has sent its result: the task, its role, the host, the worker's CPU seconds (its own,
from the fork on, and that of the ssh clients it waited for), how many Jinja templates and expressions it compiled
(ansible-core 2.19 compiles every template a task reads, role variables included, again in each worker) and the CPU
seconds spent compiling them, and the CPU seconds spent building module payloads (``modify_module``: the first task
of a run that runs a module builds its AnsiballZ payload; the others read it from the run's cache).

Bench tooling, not part of the collection: it wraps private methods of ansible-core 2.19 (``WorkerProcess._run``,
``TemplateEngine._compile_template``/``_compile_expression`` and the action plugins' ``modify_module``). Where a
release lacks the compile methods, ``compiles`` and ``compile_cpu`` are null; where it lacks
``WorkerProcess._run``, this exits with an error.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import resource
import runpy
import sys
import time

BIN = os.path.dirname(sys.executable)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    out, args = argv[0], argv[1:]
    from ansible.executor.process import worker  # pylint: disable=import-outside-toplevel

    counter = {'compiles': None, 'compile_cpu': None, 'build_cpu': 0.0}

    def timed(func, key, count=None):
        def wrapped(*a, **kw):
            if count:
                counter[count] += 1
            t0 = time.process_time()
            try:
                return func(*a, **kw)
            finally:
                counter[key] += time.process_time() - t0
        return wrapped

    try:
        from ansible._internal._templating import _engine  # pylint: disable=import-outside-toplevel
        engine = _engine.TemplateEngine
        engine._compile_template = timed(engine._compile_template, 'compile_cpu', 'compiles')  # pylint: disable=protected-access
        engine._compile_expression = timed(engine._compile_expression, 'compile_cpu', 'compiles')  # pylint: disable=protected-access
        counter['compiles'], counter['compile_cpu'] = 0, 0.0
    except (ImportError, AttributeError):
        pass
    from ansible.plugins import action  # pylint: disable=import-outside-toplevel
    if hasattr(action, 'modify_module'):  # where it lacks it, build_cpu stays 0
        action.modify_module = timed(action.modify_module, 'build_cpu')

    run = worker.WorkerProcess._run  # pylint: disable=protected-access

    def recorded_run(self):
        # a fork starts with its parent's counter: count from here
        for key in ('compiles', 'compile_cpu', 'build_cpu'):
            counter[key] = 0 if counter[key] is not None else None
        try:
            return run(self)
        finally:
            own = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            task = self._task
            role = task._role.get_name(include_role_fqcn=False) if task._role else None
            line = json.dumps({'task': task.get_name(), 'role': role, 'action': (task.action or '').split('.')[-1],
                               'host': self._host.get_name(),
                               'cpu': own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
                               'compiles': counter['compiles'], 'compile_cpu': counter['compile_cpu'],
                               'build_cpu': counter['build_cpu']})
            fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (line + '\n').encode('utf-8'))
            finally:
                os.close(fd)

    worker.WorkerProcess._run = recorded_run  # pylint: disable=protected-access
    sys.argv = [os.path.join(BIN, 'ansible-playbook')] + args
    runpy.run_path(sys.argv[0], run_name='__main__')
    return 0


def summary(path):
    """The records of OUT.jsonl by role: {role: {'tasks', 'workers', 'cpu', 'compiles', 'compile_cpu', 'build_cpu'}},
    and the tasks (the same keys and 'action'), costliest first."""
    roles, tasks = {}, {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            role = rec['role'] or '(play)'
            r = roles.setdefault(role, {'tasks': set(), 'workers': 0, 'cpu': 0.0, 'compiles': 0, 'compile_cpu': 0.0,
                                        'build_cpu': 0.0})
            r['tasks'].add(rec['task'])
            t = tasks.setdefault((role, rec['task']), {'workers': 0, 'cpu': 0.0, 'compiles': 0, 'compile_cpu': 0.0,
                                                       'build_cpu': 0.0, 'action': rec['action']})
            for agg in (r, t):
                agg['workers'] += 1
                agg['cpu'] += rec['cpu']
                for key in ('compiles', 'compile_cpu', 'build_cpu'):
                    agg[key] += rec.get(key) or 0
    for r in roles.values():
        r['tasks'] = len(r['tasks'])
    return roles, sorted(tasks.items(), key=lambda kv: -kv[1]['cpu'])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
