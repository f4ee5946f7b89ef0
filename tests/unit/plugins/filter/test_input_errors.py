# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's stops on bad input (filters of plugins/filter/input_errors.py) against the same tasks with
their messages written in Jinja alone (module_utils/cases/_input_errors.yml), both rendered with ansible's Templar
and the collection's filters: the same tasks stop, with the same text."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import glob
import os

import pytest
import yaml
from ansible_collections.llmserve.sglang.tests.unit.plugins.filter.jinja_alone import ROOT, load_cases, make_templar, trust_as_template


ROLE = os.path.join(ROOT, 'roles', 'preflight')
CASES = load_cases('_input_errors.yml')


def walk(tasks):
    for task in tasks or []:
        yield task
        for key in ('block', 'rescue', 'always'):
            yield from walk(task.get(key))


def role_task(path, name):
    with open(os.path.join(ROLE, 'tasks', path), encoding='utf-8') as f:
        found = [t for t in walk(yaml.safe_load(f)) if t.get('name') == name]
    assert len(found) == 1, (path, name)
    return found[0]


def listed(value):
    return [value] if isinstance(value, str) else list(value or [])


def stop_message(task, facts):
    """The message ``task`` stops with on ``facts`` (its own vars over them), None when it does not stop."""
    variables = copy.deepcopy(facts)
    for key, value in (task.get('vars') or {}).items():
        variables[key] = trust_as_template(value) if isinstance(value, str) else value
    templar = make_templar(variables)

    def holds(condition):
        result = templar.template(trust_as_template('{{ (%s) }}' % condition))
        assert isinstance(result, bool), (condition, result)  # a conditional must be a boolean
        return result

    if not all(holds(c) for c in listed(task.get('when'))):
        return None
    if 'ansible.builtin.fail' in task:
        return templar.template(trust_as_template(task['ansible.builtin.fail']['msg']))
    check = task['ansible.builtin.assert']
    if all(holds(c) for c in listed(check['that'])):
        return None
    return templar.template(trust_as_template(check['fail_msg']))


def task_cases():
    for entry in CASES['tasks']:
        for case in entry['cases']:
            yield pytest.param(entry, case, id='%s: %s: %s' % (entry['file'], entry['name'][:40], case['name']))


@pytest.mark.parametrize('entry, case', list(task_cases()))
def test_the_role_stops_as_jinja_alone_did(entry, case):
    facts = dict(copy.deepcopy(CASES['facts']), **copy.deepcopy(case['facts']))
    role = stop_message(role_task(entry['file'], entry['name']), facts)
    # one reference task, or several that the role's task took the place of: the first of them that stops
    references = [stop_message(task, facts) for task in entry.get('references') or [entry['reference']]]
    reference = next((msg for msg in references if msg is not None), None)
    assert role == reference
    if 'msg' in case:
        assert role == case['msg']
    for part in case.get('contains', []):
        assert part in role, part


def test_the_role_assembles_no_input_error_in_jinja():
    """The prefix of an input error and the variable names of sglang_launch's options are written in Python only."""
    for path in glob.glob(os.path.join(ROLE, 'tasks', '*.yml')) + glob.glob(os.path.join(ROLE, 'vars', '*.yml')):
        with open(path, encoding='utf-8') as f:
            text = f.read()
        assert 'invalid input' not in text, path
        assert 'preflight_option_vars' not in text, path
