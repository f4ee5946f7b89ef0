# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The candidate_entry filter in the role's tasks against the same decisions written in Jinja alone
(module_utils/cases/candidate.yml), both rendered with ansible's Templar and the collection's filters (controller
side: the Templar and ansible.errors are there)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import json
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.utils.vars import merge_hash

from ansible_collections.llmserve.sglang.plugins.filter import candidate as candidate_filter
from ansible_collections.llmserve.sglang.plugins.module_utils import candidate
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import trial
from ansible_collections.llmserve.sglang.tests.unit.plugins.filter.jinja_alone import ROOT, load_cases, make_templar, trust_as_template

ROLE = os.path.join(ROOT, 'roles', 'backend_trial')
CASES = load_cases('candidate.yml')
with open(os.path.join(ROLE, 'files', 'failure_signatures.yml'), encoding='utf-8') as _f:
    SIGNATURES = yaml.safe_load(_f)['signatures']
with open(os.path.join(ROLE, 'vars', 'main.yml'), encoding='utf-8') as _f:
    ROLE_VARS = yaml.safe_load(_f)
with open(os.path.join(ROOT, 'tests', 'data', 'sglang', 'server-args-0.5.23.json'), encoding='utf-8') as _f:
    FLAGS = json.dumps(sglang_flags.compact_options(json.load(_f)['options']))  # as gpu_info returns it


def walk(tasks):
    for task in tasks or []:
        yield task
        for key in ('block', 'rescue', 'always'):
            yield from walk(task.get(key))


def role_task(path, prefix):
    """The role's set_fact task whose name starts with ``prefix``."""
    with open(os.path.join(ROLE, 'tasks', path), encoding='utf-8') as f:
        found = [t for t in walk(yaml.safe_load(f)) if t.get('name', '').startswith(prefix)]
    assert len(found) == 1, (path, prefix, found)
    return found[0]


def facts_of(case):
    """The facts a case's stage runs with (the role's facts, its registered results, and backend_trial_context)."""
    facts = copy.deepcopy(CASES['facts'])
    given = copy.deepcopy(case.get('facts') or {})
    for name in ('preflight_group', 'preflight_settings'):  # preflight's dicts: a case gives the keys it changes
        facts[name] = merge_hash(facts[name], given.pop(name, {}))
    facts.update(given)
    plan = facts.pop('plan')
    facts['preflight_plan'] = plan
    facts['backend_trial_by_name'] = merge_hash(trial.init_results(plan), case.get('entries') or {})
    facts['backend_trial_candidate'] = [e for e in plan if e['name'] == case['candidate']][0]
    facts['backend_trial_position'] = 1
    # the role's context names the user's table (the filter puts the shipped one after it); the reference tasks
    # pass the whole table
    facts['backend_trial_extra_signatures'] = facts.pop('extra_signatures')
    facts['backend_trial_signatures'] = copy.deepcopy(facts['backend_trial_extra_signatures']) + copy.deepcopy(SIGNATURES)
    facts.setdefault('backend_trial_flags', FLAGS)
    facts['backend_trial_context'] = trust_as_template(ROLE_VARS['backend_trial_context'])
    at = datetime.datetime.fromtimestamp(facts.pop('now'))
    facts['now'] = lambda utc=False, fmt=None: at
    return facts


def run(tasks, facts):
    """Run set_fact tasks one after the other as Ansible would (task vars are templates); the facts they set."""
    facts = dict(facts)
    changed = {}
    for task in tasks:
        scope = dict(facts)
        scope.update((k, trust_as_template(v)) for k, v in (task.get('vars') or {}).items())
        templar = make_templar(scope)
        now = dict((k, templar.template(trust_as_template(v))) for k, v in task['ansible.builtin.set_fact'].items())
        facts.update(now)
        changed.update(now)
    return changed


def plain(value):
    """Plain data (dicts, lists, scalars), keys in their order."""
    return json.loads(json.dumps(value))


def at(entry, path):
    """The value at a dotted path (``key#``: the length of a list there; None when absent)."""
    count = path.endswith('#')
    value = entry
    for part in path.rstrip('#').split('.'):
        if isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return len(value) if count and value is not None else value


@pytest.mark.parametrize('case', CASES['cases'], ids=[c['name'] for c in CASES['cases']])
def test_the_role_records_what_jinja_alone_did(case):
    facts = facts_of(case)
    reference = run(CASES['reference_tasks'][case['stage']], facts)
    role = run([role_task(*CASES['new_tasks'][case['stage']])], facts)
    assert sorted(role) == sorted(reference)
    for name in reference:
        # equal, and the same JSON text: the same keys in the same order, the same types
        assert json.dumps(plain(role[name])) == json.dumps(plain(reference[name])), name
    entry = plain(role['backend_trial_by_name'])[case['candidate']]
    for path, want in case['expect'].items():
        assert at(entry, path) == want, path
    if 'selected' in case:  # '' for none where ansible-core < 2.19 templates a scalar into a string
        assert role['backend_trial_selected'] in ([case['selected']] if case['selected'] else [None, ''])
    assert candidate.schema_errors(entry) == []
    before = facts['backend_trial_by_name']
    assert list(role['backend_trial_by_name']) == list(before)  # plan order; only the candidate's entry changes
    assert [n for n in before if plain(before[n]) != plain(role['backend_trial_by_name'][n])] in ([], [case['candidate']])
    written = [k for k in entry if k not in before[case['candidate']] or plain(before[case['candidate']][k]) != entry[k]]
    assert set(written) <= set(candidate.keys_set_by(case['stage'])), written


def test_every_stage_has_a_case_and_a_role_task():
    assert sorted(set(c['stage'] for c in CASES['cases'])) == sorted(candidate.STAGES)
    assert sorted(CASES['new_tasks']) == sorted(candidate.STAGES) == sorted(CASES['reference_tasks'])


COMBINE = [
    ({'a': 1, 'b': {'x': 1, 'y': [1]}}, {'b': {'y': [2], 'z': 3}, 'c': None}),
    ({'a': {'x': 1}}, {'a': None}),
    ({'a': None, 'b': 2}, {'a': {'x': 1}}),
    ({}, {'b': 1, 'a': 2}),
    ({'a': 1, 'b': 2}, {}),
    ({'b': 1, 'a': 2}, {'a': 2, 'b': 1}),  # equal: the update's order
    ({'n': {'b': 1, 'a': 2}, 'm': 0}, {'n': {'a': 2, 'b': 1}}),
    ({'l': [1, 2]}, {'l': [3]}),
]


@pytest.mark.parametrize('recursive', [True, False])
@pytest.mark.parametrize('base, update', COMBINE)
def test_combine_is_ansibles(base, update, recursive):
    got = candidate.combine(copy.deepcopy(base), copy.deepcopy(update), recursive)
    want = merge_hash(copy.deepcopy(base), copy.deepcopy(update), recursive)
    assert json.dumps(got) == json.dumps(want)


def entries():
    return trial.init_results(CASES['facts']['plan'])


def test_the_filter_reports_bad_signatures_and_flags_and_loads_the_shipped_table():
    by_name = entries()
    failed = {'failed': {'msg': 'refused'}}
    with pytest.raises(AnsibleFilterError, match='diagnose: bad failure signature'):
        candidate_filter.candidate_entry(by_name, 'fa3', 'trial_launch_error', failed, None,
                                         {'signatures': [{'id': 'x', 'match': {'nope': 1}}]})
    with pytest.raises(AnsibleFilterError, match='diagnose: flags'):
        candidate_filter.candidate_entry(by_name, 'fa3', 'trial_launch_error', failed, None, {'flags': 42})
    with pytest.raises(AnsibleFilterError, match='unknown stage'):
        candidate_filter.candidate_entry(by_name, 'fa3', 'bench', failed)
    # without signatures: the table shipped with the collection (its launch_error signature)
    got = candidate_filter.candidate_entry(by_name, 'fa3', 'trial_launch_error', failed)
    assert got['fa3']['diagnosis']['id'] == 'launch_error'
    assert candidate.record(by_name, 'fa3', 'trial_launch_error', failed)['fa3']['diagnosis']['id'] == 'unknown'
