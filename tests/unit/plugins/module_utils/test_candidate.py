# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A candidate's report entry: record() stage by stage, and the entry's schema (the filter in the role's tasks
against Jinja alone: tests/unit/plugins/filter/test_candidate_entry.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import candidate
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import trial

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..', '..', '..')
with open(os.path.join(HERE, 'cases', 'candidate.yml'), encoding='utf-8') as _f:
    CASES = yaml.safe_load(_f)
with open(os.path.join(ROOT, 'roles', 'backend_trial', 'files', 'failure_signatures.yml'), encoding='utf-8') as _f:
    SIGNATURES = yaml.safe_load(_f)['signatures']
with open(os.path.join(ROOT, 'tests', 'data', 'sglang', 'server-args-0.5.23.json'), encoding='utf-8') as _f:
    FLAGS = json.dumps(sglang_flags.compact_options(json.load(_f)['options']))

# what the role's task for each stage passes as ``results`` (facts: the case's; head: hostvars of the group's head)
RESULTS = {
    'reuse': lambda facts, head: {'await': facts['backend_trial_reuse_ready'], 'smoke': head['backend_trial_reuse_smoke']},
    'screen': lambda facts, head: {'await': facts['backend_trial_screen_await']},
    'screen_launch_error': lambda facts, head: {'failed': facts['ansible_failed_result']},
    'trial': lambda facts, head: {'await': facts['backend_trial_await'], 'postmortem': facts.get('backend_trial_postmortem'),
                                  'smoke': head.get('backend_trial_smoke')},
    'trial_launch_error': lambda facts, head: {'failed': facts['ansible_failed_result']},
}


def at(entry, path):
    """The value at a dotted path (``key#``: the length of a list there; None when absent)."""
    value = entry
    for part in path.rstrip('#').split('.'):
        if isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return len(value) if path.endswith('#') and value is not None else value


@pytest.mark.parametrize('case', CASES['cases'], ids=[c['name'] for c in CASES['cases']])
def test_record(case):
    """The cases of the filter's test, record() called directly with what the role's task passes."""
    facts = copy.deepcopy(CASES['facts'])
    given = copy.deepcopy(case.get('facts') or {})
    group = dict(facts['preflight_group'], **given.pop('preflight_group', {}))
    layers = given.pop('preflight_settings', {}).get('screen', {}).get('layers', 4)
    facts.update(given)
    by_name = trial.init_results(facts['plan'])
    for name, fields in (case.get('entries') or {}).items():
        by_name[name].update(fields)
    plan_entry = [e for e in facts['plan'] if e['name'] == case['candidate']][0]
    started = facts['backend_trial_t0'] if case['stage'] == 'trial' else facts['backend_trial_screen_t0']
    context = {'signatures': facts['extra_signatures'] + SIGNATURES, 'arch': 'sm120',
               'flags': facts.get('backend_trial_flags', FLAGS), 'layers': layers}
    results = RESULTS[case['stage']](facts, facts['hostvars'].get(group['head']) or {})
    assert sorted(results) == sorted(candidate.RESULTS[case['stage']])
    before = copy.deepcopy(by_name)
    got = candidate.record(by_name, plan_entry, case['stage'], results, facts['now'] - float(started), context)
    assert by_name == before  # the input is not changed
    for path, want in case['expect'].items():
        assert at(got[case['candidate']], path) == want, path


def test_the_stages():
    assert sorted(set(c['stage'] for c in CASES['cases'])) == sorted(candidate.STAGES)
    assert sorted(candidate.RESULTS) == sorted(candidate.STAGES) == sorted(RESULTS)
    assert [s for s in candidate.STAGES if 'diagnosis' in candidate.keys_set_by(s)] == list(candidate.DIAGNOSED)


def test_the_schema_lists_what_trial_init_and_check_mode_write():
    plan = CASES['facts']['plan']
    by_name = trial.init_results(plan)
    assert all(list(e) == candidate.keys_set_by('init') for e in by_name.values())
    marked = trial.check_mode_results(by_name, [e for e in plan if e['outcome'] == 'planned'])
    for name, entry in marked.items():
        assert candidate.schema_errors(entry) == []
        written = [k for k in entry if entry[k] != by_name[name].get(k, object())]
        assert set(written) <= set(candidate.keys_set_by('check_mode'))
    assert candidate.schema_errors({'name': 'a', 'outcome': 'ready', 'seconds': True, 'shiny': 1}) == [
        'seconds: bool is not number', 'shiny: not a key of the entry']
    assert candidate.schema_errors({'rank': None, 'ready_seconds': 3, 'would_try': 2}) == []
    assert candidate.schema_errors({'reason': 3}) == ['reason: int is not str|null']


def test_combine_over_nothing_copies_the_update():
    update = {'outcome': 'failed'}
    got = candidate.combine(None, update)
    assert got == update and got is not update


def entries():
    return trial.init_results(CASES['facts']['plan'])


KILLED = {'status': 'killed', 'reason': 'killed', 'signal': 9, 'evidence': ['process 7 ended (signal 9/KILL)'],
          'log_tail': ['line %d' % i for i in range(20)], 'milestone': 'load_begin'}


def test_record_reuse():
    by_name = entries()
    results = {'await': {'status': 'ready', 'seconds': 0.5}, 'smoke': {'ok': True, 'checks': []}}
    got = candidate.record(by_name, 'known-good', 'reuse', results, seconds=99)
    assert got['known-good'] == dict(by_name['known-good'], outcome='ready', reason=None, reused=True,
                                     evidence='already serving, unit unchanged (ready)', seconds=0.5,
                                     smoke={'ok': True, 'checks': []})
    assert list(got['known-good'])[-1] == 'reused'
    assert by_name['known-good']['outcome'] == 'skipped'  # the input is not changed


def test_record_screen_failed_and_passed():
    by_name = entries()
    context = {'layers': 2, 'signatures': SIGNATURES, 'arch': 'sm120'}
    entry = candidate.record(by_name, {'name': 'trtllm'}, 'screen', {'await': KILLED}, 3.14159, context)['trtllm']
    assert entry['screen'] == {'seconds': 3.14, 'milestone': 'load_begin', 'layers': 2, 'outcome': 'failed',
                               'reason': 'killed', 'evidence': 'process 7 ended (signal 9/KILL)'}
    assert (entry['outcome'], entry['reason'], entry['seconds']) == ('failed', 'killed', 3.14)
    assert entry['log_tail'] == ['line %d' % i for i in range(5, 20)]
    assert entry['diagnosis']['id'] == 'killed_by_signal'
    with_backend = candidate.record(by_name, CASES['facts']['plan'][0], 'screen', {'await': KILLED}, 3, context)
    assert with_backend['trtllm']['diagnosis']['id'] == 'trtllm_moe_killed_sm120'  # the candidate's backends count
    ready = {'status': 'ready', 'elapsed': 2.0, 'probe': {'ok': True, 'seconds': 0.1}}
    passed = candidate.record(by_name, {'name': 'trtllm'}, 'screen', {'await': ready}, 2, context)['trtllm']
    assert passed['screen']['outcome'] == 'passed' and passed['outcome'] == 'skipped'
    assert passed['diagnosis'] is None and 'log_tail' not in passed


def test_record_trial_judged_by_the_post_mortem():
    by_name = entries()
    results = {'await': {'status': 'ready', 'seconds': 100.0}, 'postmortem': KILLED,
               'smoke': {'ok': False, 'reason': 'http_error', 'evidence': ['connection reset']}}
    entry = candidate.record(by_name, CASES['facts']['plan'][0], 'trial', results, 120.004,
                             {'signatures': SIGNATURES, 'arch': 'sm120'})['trtllm']
    assert (entry['outcome'], entry['reason'], entry['seconds']) == ('failed', 'killed', 120.0)
    assert entry['smoke'] is None and entry['log_tail'] == KILLED['log_tail'][-15:]
    assert entry['diagnosis']['id'] == 'trtllm_moe_killed_sm120'
    skipped = {'await': {'status': 'ready'}, 'smoke': {'skipped': True}}
    entry = candidate.record(by_name, 'trtllm', 'trial', skipped, 1.0)['trtllm']
    assert (entry['outcome'], entry['reason'], entry['smoke']['ok']) == ('failed', 'smoke_failed', None)


def test_record_launch_errors():
    by_name = entries()
    failed = {'failed': True, 'msg': 'moe_runner_backend: is not a choice of --moe-runner-backend'}
    table = {'signatures': SIGNATURES}
    entry = candidate.record(by_name, 'fa3', 'trial_launch_error', {'failed': failed}, None, table)['fa3']
    assert (entry['outcome'], entry['reason'], entry['evidence']) == ('failed', 'launch_error', failed['msg'])
    assert entry['diagnosis']['id'] == 'unknown_flag' and entry['screen'] is None and entry['seconds'] == 0.0
    entry = candidate.record(by_name, 'fa3', 'screen_launch_error', {'failed': {'failed': True}}, None,
                             dict(table, layers=4))['fa3']
    assert entry['screen'] == {'outcome': 'failed', 'reason': 'launch_error', 'evidence': 'unknown error',
                               'seconds': 0.0, 'milestone': None, 'layers': 4}
    assert entry['diagnosis']['id'] == 'launch_error'
    assert list(entry) == candidate.keys_set_by('init')


def test_record_a_candidate_not_in_the_entries():
    got = candidate.record({'a': {'name': 'a'}}, 'b', 'trial_launch_error', {'failed': {'msg': 'no'}})
    assert list(got) == ['a', 'b']
    assert got['b'] == {'outcome': 'failed', 'reason': 'launch_error', 'evidence': 'no',
                        'diagnosis': got['b']['diagnosis']}


def test_record_refuses_an_unknown_stage():
    with pytest.raises(ValueError, match="unknown stage 'smoke'"):
        candidate.record({}, 'a', 'smoke', {})
