# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""trial_run (an action: the modules it runs are scripted): the cases of test_trial_run.yaml.

A case: ``input`` (the task's arguments; a list of dicts is merged in order), ``modules`` (the module runs expected,
in order: ``module``, ``args`` (a subset of the arguments; ``absent``: keys that must not be passed) and the
``result``), ``settings`` (keys that replace those of the input's settings), ``controller_gone_after`` (the
parent process changes after that many module runs: ansible-playbook gone), ``output`` (values in the task's
result by dotted path), ``said`` (substrings of the controller lines).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.errors import AnsibleAction
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task

from ansible_collections.llmserve.sglang.plugins.action import trial_run
from ansible_collections.llmserve.sglang.plugins.module_utils import trial

with open(os.path.splitext(__file__)[0] + '.yaml') as f:
    CASES = [c for c in yaml.safe_load(f) if 'id' in c]


class _Shell(object):  # pylint: disable=too-few-public-methods
    tmpdir = None


class _Connection(object):  # pylint: disable=too-few-public-methods
    _shell = _Shell()


def at(value, path):
    for part in str(path).split('.'):
        if isinstance(value, list) and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return '<absent>'
    return value


def subset_problems(want, got, where):
    out = []
    for key, value in (want or {}).items():
        if key not in got:
            out.append('%s: %s not passed' % (where, key))
        elif isinstance(value, dict) and isinstance(got[key], dict):
            out.extend(subset_problems(value, got[key], '%s.%s' % (where, key)))
        elif got[key] != value:
            out.append('%s: %s is %r, want %r' % (where, key, got[key], value))
    return out


def run(case, monkeypatch):
    args = {}
    for part in case['input'] if isinstance(case['input'], list) else [case['input']]:
        args.update(part)
    args['settings'] = dict(args['settings'], **(case.get('settings') or {}))
    args.setdefault('by_name', trial.init_results(args['planned']))
    script = list(case.get('modules') or [])
    problems, said = [], []

    def execute(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        if not script:
            problems.append('unexpected run of %s %r' % (module_name, module_args))
            return {'failed': True, 'msg': 'unexpected'}
        want = script.pop(0)
        where = '%s (%s)' % (want['module'], want.get('id', ''))
        if module_name != 'llmserve.sglang.' + want['module']:
            problems.append('%s: ran %s' % (where, module_name))
        problems.extend(subset_problems(want.get('args'), module_args, where))
        problems.extend('%s: %s passed' % (where, k) for k in want.get('absent') or [] if k in module_args)
        return dict(want.get('result') or {})

    monkeypatch.setattr(trial_run.ActionModule, '_execute_module', execute)
    if case.get('controller_gone_after') is not None:
        parents = [1000] * (case['controller_gone_after'] + 1)   # the first answer is read before any run
        monkeypatch.setattr(trial_run.os, 'getppid', lambda: parents.pop(0) if parents else 1)
    monkeypatch.setattr(trial_run.display, 'display', lambda msg, *a, **k: said.append(msg))
    task = Task()
    task.args = args
    action = trial_run.ActionModule(task, _Connection(), PlayContext(), DataLoader(), None)
    try:
        result = action.run(task_vars={'inventory_hostname': 'gpu01'})
    except AnsibleAction as exc:
        result = dict(getattr(exc, 'result_contribution', None) or exc.result)
    problems.extend('module run not made: %s %s' % (w['module'], w.get('id', '')) for w in script)
    return result, problems, said


@pytest.mark.parametrize('case', CASES, ids=[c['id'] for c in CASES])
def test_trial_run(case, monkeypatch):
    result, problems, said = run(case, monkeypatch)
    for path, want in (case.get('output') or {}).items():
        got = at(result, path)
        if got != want:
            problems.append('result %s is %r, want %r' % (path, got, want))
    for text in case.get('said') or []:
        if not any(text in line for line in said):
            problems.append('no line says %r (%r)' % (text, said))
    assert not problems, '\n'.join(problems + ['result: %r' % (result,)])
