# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from collections import OrderedDict

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import trial

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'trial.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['outcome'], ids=[c['name'] for c in CASES['outcome']])
def test_outcome(case):
    got = trial.outcome(case['await'], case.get('smoke'), 12.345)
    for key, value in case['want'].items():
        assert got[key] == value, key
    assert got['seconds'] == 12.35


@pytest.mark.parametrize('case', CASES['verdict'], ids=[c['name'] for c in CASES['verdict']])
def test_benchmark_verdict(case):
    got = trial.benchmark_verdict(case['result'])
    assert set(got) == set(['failed', 'msg'])
    for key, value in case['want'].items():
        assert got[key] == value, key


def test_benchmark_failure_keeps_the_request_error_and_the_crash_apart():
    bench = {'concurrency': {'1': {'completed': 2, 'failed': 0},
                             '2': {'completed': 1, 'failed': 3, 'rejected': 0, 'errors': ['connect: refused']}}}
    crash = {'status': 'crashed', 'evidence': ['IndexError: index out of range in self']}
    got = trial.benchmark_failure(bench, crash)
    assert (got['level'], got['failed'], got['total'], got['by']) == ('2', 3, 6, 'benchmark')
    assert got['first_error'] == 'connect: refused' and got['server_answers'] is False
    assert trial.benchmark_failure(bench, {'status': 'ready'})['by'] == 'server'
    assert trial.benchmark_failure(bench)['server_answers'] is None  # not asked
    assert trial.benchmark_failure({'concurrency': {'1': {'completed': 4, 'failed': 0}}}, {'status': 'ready'}) is None
    assert trial.benchmark_failure(None, crash) is None  # no load test ran: its input cannot be at fault


@pytest.mark.parametrize('case', CASES['select'], ids=[c['name'] for c in CASES['select']])
def test_select(case):
    by_name = OrderedDict((r['name'], r) for r in case['results'])
    assert trial.select(by_name, case['selection']) == case['want']


def test_init_results_keeps_plan_order_and_skip_reasons():
    plan = [{'name': 'x', 'outcome': 'skipped', 'reason': 'arch_unsupported', 'evidence': 'sm100 only', 'args': []},
            {'name': 'y', 'outcome': 'planned', 'reason': None, 'args': ['--a', 'b'], 'known_good': True}]
    got = trial.init_results(plan)
    assert list(got) == ['x', 'y']
    assert got['x']['reason'] == 'arch_unsupported' and got['x']['evidence'] == 'sm100 only'
    assert got['y']['outcome'] == 'skipped' and got['y']['reason'] == 'not_needed' and got['y']['known_good']
    assert got['y']['screen'] is None and got['y']['diagnosis'] is None


@pytest.mark.parametrize('case', CASES['verified'], ids=[c['name'] for c in CASES['verified']])
def test_verified_by_trial(case):
    assert trial.verified_by_trial(case['outcome'], case['install'], case.get('check_mode', False)) is case['want']


@pytest.mark.parametrize('case', CASES['fallback_used'], ids=[c['name'] for c in CASES['fallback_used']])
def test_fallback_used(case):
    assert trial.fallback_used(case['results'], case['selected'], case.get('final_state', 'serving')) is case['want']


def test_check_mode_results_mark_the_order_and_keep_plan_skips():
    plan = [{'name': 'x', 'outcome': 'skipped', 'reason': 'arch_unsupported', 'evidence': 'sm100 only', 'args': []},
            {'name': 'y', 'outcome': 'planned', 'args': []},
            {'name': 'kg', 'outcome': 'planned', 'args': [], 'known_good': True}]
    by_name = trial.init_results(plan)
    got = trial.check_mode_results(by_name, [e for e in plan if e['outcome'] == 'planned'])
    assert got['x']['reason'] == 'arch_unsupported' and 'would_try' not in got['x']
    assert (got['y']['reason'], got['y']['would_try']) == ('check_mode', 1)
    assert (got['kg']['reason'], got['kg']['would_try']) == ('check_mode', 2)
    assert got['y']['evidence'].startswith('would be tried first')
    assert 'the fallback' in got['kg']['evidence'] and got['kg']['outcome'] == 'skipped'
    assert by_name['y']['reason'] == 'not_needed'  # the input is not changed
    # a kept (reused) configuration is not marked
    by_name['kg'].update(outcome='ready', reason=None, reused=True)
    assert trial.check_mode_results(by_name, [plan[2]])['kg']['reason'] is None


@pytest.mark.parametrize('smoke, lost', [
    (None, False),
    ({'skipped': True}, False),
    ({'ok': True}, False),
    ({'ok': True, 'benchmark': {'concurrency': {'2': {'failed': 3, 'completed': 3, 'errors': ['connection reset']}}}}, True),
    ({'ok': False, 'reason': 'http_error'}, True),
    ({'ok': False, 'reason': 'timeout'}, True),
    ({'ok': False, 'reason': 'nan'}, True),
    ({'ok': False, 'reason': 'garbage'}, False),
    ({'ok': False, 'reason': 'wrong_answer'}, False),
    # the smoke test's own watch said how the server ended: no post-mortem
    ({'ok': False, 'reason': 'server_lost', 'server': {'status': 'crashed'}}, False),
    ({'ok': False, 'reason': 'http_error', 'server': {'status': 'killed'}}, False),
])
def test_lost_server(smoke, lost):
    assert trial.lost_server(smoke) is lost


def test_after_smoke_takes_the_post_mortem_only_when_it_found_a_failure():
    ready = {'status': 'ready', 'evidence': ['The server is fired up']}
    dead = {'status': 'crashed', 'reason': 'crashed', 'evidence': ['Scheduler hit an exception: RuntimeError: boom']}
    assert trial.after_smoke(ready, None) is ready
    assert trial.after_smoke(ready, {'skipped': True}) is ready
    assert trial.after_smoke(ready, {'status': 'ready'}) is ready
    got = trial.after_smoke(ready, dead)
    assert got['status'] == 'crashed' and got['phase'] == 'after_smoke'
    # and the outcome then says crashed, with the server's own line
    out = trial.outcome(got, {'ok': False, 'reason': 'http_error'}, 1.0)
    assert (out['outcome'], out['reason']) == ('failed', 'crashed') and 'RuntimeError' in out['evidence']


def test_after_smoke_takes_the_smoke_test_s_own_verdict_when_no_post_mortem_ran():
    ready = {'status': 'ready', 'evidence': ['The server is fired up']}
    seen = {'status': 'crashed', 'reason': 'crashed', 'evidence': ['Scheduler hit an exception: RuntimeError: boom']}
    watched = {'ok': False, 'reason': 'server_lost', 'server': seen, 'checks': []}
    for postmortem in (None, {'skipped': True}):
        got = trial.after_smoke(ready, postmortem, watched)
        assert got['status'] == 'crashed' and got['phase'] == 'after_smoke'
    assert trial.after_smoke(ready, None, {'ok': False, 'reason': 'garbage'}) is ready
    # a post-mortem that ran decides
    assert trial.after_smoke(ready, {'status': 'killed', 'reason': 'killed'}, watched)['status'] == 'killed'
    out = trial.outcome(trial.after_smoke(ready, None, watched), watched, 1.0)
    assert (out['outcome'], out['reason']) == ('failed', 'crashed') and 'RuntimeError' in out['evidence']
