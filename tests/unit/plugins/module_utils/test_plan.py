# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import arch_matrix
from ansible_collections.llmserve.sglang.plugins.module_utils import plan

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'plan.yml')) as _f:
    CASES = yaml.safe_load(_f)


def arch_check(flag, value, arch):
    result = arch_matrix.classify(flag, value, arch)
    verdict = result['verdict']
    return ('ok' if verdict in ('ok', 'warn') else verdict), result['reason']


def flag_checker(unknown):
    def check(args):
        return ['unknown flag %s' % a for a in args if a in unknown]
    return check


@pytest.mark.parametrize('case', CASES['normalize_errors'], ids=[c['name'] for c in CASES['normalize_errors']])
def test_normalize_errors(case):
    with pytest.raises(plan.PlanError, match=case['error']):
        plan.normalize_candidates(case['candidates'], CASES['known_good'])


@pytest.mark.parametrize('case', CASES['normalize_ok'], ids=[c['name'] for c in CASES['normalize_ok']])
def test_normalize_ok(case):
    got = plan.normalize_candidates(case['candidates'], CASES['known_good'])
    assert [c['name'] for c in got] == case['want_names']
    assert [c['name'] for c in got if c['known_good']] == ['known-good']


@pytest.mark.parametrize('case', CASES['build_plan'], ids=[c['name'] for c in CASES['build_plan']])
def test_build_plan(case):
    gpu = case.get('gpu', CASES['gpu'])
    cands = plan.normalize_candidates(case['candidates'], CASES['known_good'])
    record = {'entries': []}
    for name in case.get('record_failed', []):
        cand = [c for c in cands if c['name'] == name][0]
        record['entries'].append({'fingerprint': plan.gpu_fingerprint(gpu),
                                  'sglang_version': case.get('record_version', '0.5.23'),
                                  'config_key': plan.config_key(cand, {}), 'outcome': 'failed',
                                  'reason': 'crashed', 'evidence': 'boom', 'time': 'then'})
    got = plan.build_plan(cands, {}, gpu, '0.5.23', record, arch_check, flag_checker(case.get('unknown_flags', [])),
                          base_args=case.get('base_args', []))
    assert [{'name': e['name'], 'outcome': e['outcome'], 'reason': e['reason']} for e in got] == case['want']
    for e in got:
        if e['outcome'] == 'skipped':
            assert e['evidence'], 'a skip must say why'
    for name, evidence in (case.get('want_evidence') or {}).items():
        assert [e['evidence'] for e in got if e['name'] == name][0].startswith(evidence)


@pytest.mark.parametrize('args, want', [
    (['--moe-runner-backend', 'flashinfer_trtllm'], [('--moe-runner-backend', 'flashinfer_trtllm')]),
    (['--moe-runner-backend=flashinfer_trtllm'], [('--moe-runner-backend', 'flashinfer_trtllm')]),
    (['--trust-remote-code', '--tp-size', '8', '--x=a=b'], [('--tp-size', '8'), ('--x', 'a=b')]),
    (['--enable-metrics'], []),
    ([], []),
])
def test_flag_pairs(args, want):
    assert plan.flag_pairs(args) == want


def test_config_key_ignores_name_and_force_but_not_config():
    a = {'name': 'a', 'moe_runner_backend': 'x', 'extra_args': [], 'env': {}, 'force': False}
    b = dict(a, name='b', force=True)
    c = dict(a, moe_runner_backend='y')
    assert plan.config_key(a) == plan.config_key(b)
    assert plan.config_key(a) != plan.config_key(c)
    assert plan.config_key(a, {'tp_size': 8}) != plan.config_key(a, {'tp_size': 4})


def test_merge_record_appends_bounds_and_keeps_selected():
    gpu = CASES['gpu']
    fp = plan.gpu_fingerprint(gpu)
    results = [{'name': 'a', 'config_key': 'k1', 'outcome': 'failed', 'reason': 'crashed',
                'screen': {'outcome': 'failed', 'reason': 'crashed', 'seconds': 3.1}, 'diagnosis': {'id': 'trtllm_moe_sm100_only'}},
               {'name': 'b', 'config_key': 'k2', 'outcome': 'skipped', 'reason': 'arch_unsupported'},
               {'name': 'c', 'config_key': 'k3', 'outcome': 'ready'}]
    rec = plan.merge_record({}, fp, gpu, '0.5.23', results, {'name': 'c', 'config_key': 'k3'}, 't1')
    assert [e['name'] for e in rec['entries']] == ['a', 'c']
    assert rec['entries'][0]['screen']['outcome'] == 'failed' and rec['entries'][0]['diagnosis'] == 'trtllm_moe_sm100_only'
    assert rec['entries'][1]['screen'] is None and rec['entries'][1]['diagnosis'] is None
    assert rec['selected']['config_key'] == 'k3' and rec['selected']['time'] == 't1'
    # same selection again, reused result: nothing new (idempotent)
    again = plan.merge_record(rec, fp, gpu, '0.5.23', [dict(results[2], reused=True)],
                              {'name': 'c', 'config_key': 'k3'}, 't2')
    assert again == rec
    big = {'entries': [{'name': str(i)} for i in range(plan.RECORD_MAX_ENTRIES + 10)]}
    assert len(plan.merge_record(big, fp, gpu, '0.5.23', results, None, 't')['entries']) == plan.RECORD_MAX_ENTRIES
    assert plan.find_record_failure(rec, fp, '0.5.23', 'k1')['reason'] == 'crashed'
    assert plan.find_record_failure(rec, fp, '0.5.23', 'k3') is None


@pytest.mark.parametrize('case', CASES['reuse_check'], ids=[c['name'] for c in CASES['reuse_check']])
def test_reuse_check(case):
    gpu = CASES['gpu']
    fingerprint = plan.gpu_fingerprint(gpu)
    cands = plan.normalize_candidates(case['candidates'], CASES['known_good'])
    if case.get('order'):
        cands = [[c for c in cands if c['name'] == n][0] for n in case['order']]
    keys = dict((c['name'], plan.config_key(c, {})) for c in cands)
    keys['gone'] = 'f' * 16
    record = {'entries': [{'fingerprint': fingerprint, 'sglang_version': '0.5.23', 'config_key': keys[n],
                           'outcome': outcome, 'time': 'then', 'force': n in case.get('record_forced', [])}
                          for n, outcome in case['record'].items()]}
    if case['serving']:
        record['selected'] = {'name': case['serving'], 'config_key': keys[case['serving']],
                              'fingerprint': case.get('serving_fingerprint', fingerprint),
                              'sglang_version': case.get('serving_version', '0.5.23')}
    built = plan.build_plan(cands, {}, gpu, '0.5.23', record, arch_check, flag_checker([]))
    got = plan.reuse_check(built, record, fingerprint, '0.5.23', case.get('selection', 'first_ready'))
    assert got['recorded'] == case['want']['recorded']
    assert [b['name'] for b in got['blocked_by']] == case['want']['blocked_by']
    for name, why in (case.get('want_why') or {}).items():
        assert [b['why'] for b in got['blocked_by'] if b['name'] == name][0].startswith(why)


def test_example_fp8_inventory_plans_on_h200_without_fp4_flags():
    """inventories/example-h200-fp8: every candidate and the fallback are planned on SM90, none sets an FP4 flag."""
    root = os.path.join(HERE, '..', '..', '..', '..', 'inventories', 'example-h200-fp8', 'group_vars')
    with open(os.path.join(root, 'sglang_servers.yml')) as handle:
        inv = yaml.safe_load(handle)
    gpu = {'name': 'NVIDIA H200', 'compute_cap': '9.0', 'arch': 'sm90', 'count': 8, 'driver_version': '580.95.05'}
    cands = plan.normalize_candidates(inv['sglang_candidates'], inv['sglang_known_good'])
    got = plan.build_plan(cands, {}, gpu, '0.5.23', {}, arch_check, flag_checker([]))
    assert [e['outcome'] for e in got] == ['planned'] * len(got), got
    assert got[-1]['known_good'] and got[-1]['args'] == []
    assert not [a for e in got for a in e['args'] if 'fp4' in a], got
    assert inv['sglang_quantization'] in ('fp8', '') and 'CUDA_HOME' not in inv['sglang_env']
