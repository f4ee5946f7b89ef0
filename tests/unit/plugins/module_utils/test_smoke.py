# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import smoke

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'smoke.yml'), encoding='utf-8'))


@pytest.mark.parametrize('case', CASES['texts'], ids=[repr(c['text'])[:40] for c in CASES['texts']])
def test_garbage_reason(case):
    reason, detail = smoke.garbage_reason(case['text'])
    assert reason == case['reason'], detail


@pytest.mark.parametrize('case', CASES['expect'], ids=[repr(c['text'])[:30] for c in CASES['expect']])
def test_expect_match(case):
    assert smoke.expect_match(case['text'], case['any']) is case['matched']


@pytest.mark.parametrize('case', CASES['responses'], ids=[c['name'] for c in CASES['responses']])
def test_check_response(case):
    p = smoke.normalize_prompt(case['prompt'])
    res = smoke.check_response(p, case['status'], case['body'], seconds=0.1, error=case.get('error'),
                               judge=case.get('judge', True))
    assert res['reason'] == case['reason'], res
    assert res['ok'] is (case['reason'] is None)


def test_default_prompts_build():
    for i, spec in enumerate(smoke.DEFAULT_PROMPTS):
        p = smoke.normalize_prompt(spec, i)
        path, body = smoke.build_request(p, model='m')
        assert path == p['endpoint']
        assert body.get('temperature', body.get('sampling_params', {}).get('temperature')) == 0
        if path == '/v1/chat/completions':
            assert body['model'] == 'm' and body['messages']
        else:
            assert body['text'] and body['sampling_params']['max_new_tokens'] == p['max_tokens']


def test_normalize_drops_none_and_needs_text():
    p = smoke.normalize_prompt({'prompt': 'x', 'endpoint': None, 'name': None, 'expect_any': 'Paris'})
    assert p['endpoint'] == '/generate' and p['name'] == 'prompt0' and p['expect_any'] == ['Paris']
    with pytest.raises(ValueError):
        smoke.normalize_prompt({'name': 'empty'})


def test_overall_priority():
    checks = [{'ok': False, 'reason': 'wrong_answer'}, {'ok': False, 'reason': 'garbage'}, {'ok': True, 'reason': None}]
    assert smoke.overall(checks) == (False, 'garbage')
    assert smoke.overall([{'ok': True, 'reason': None}]) == (True, None)


@pytest.mark.parametrize('case', CASES['check_prompts'], ids=[c['name'] for c in CASES['check_prompts']])
def test_check_prompts(case):
    got = smoke.check_prompts(case['prompts'])
    assert len(got) == len(case['want']), got
    for error, want in zip(got, case['want']):
        assert want in error, (error, want)


@pytest.mark.parametrize('case', CASES['results'], ids=[c['name'] for c in CASES['results']])
def test_result(case):
    got = smoke.result(list(case['checks']), case.get('server'))
    want = case['want']
    assert (got['ok'], got['reason'], got['evidence']) == (want['ok'], want['reason'], want['evidence'])
    assert got['checks'] == case['checks']
    assert got.get('server') == case.get('server')
    assert smoke.may_have_lost(case['checks']) is want['may_have_lost']


@pytest.mark.parametrize('case', CASES['with_benchmark'], ids=[c['name'] for c in CASES['with_benchmark']])
def test_with_benchmark(case):
    before = smoke.result([{'name': 'capital', 'ok': True, 'reason': None, 'detail': ''}])
    got = smoke.with_benchmark(before, case['benchmark'], case.get('server'))
    want = case['want']
    assert (got['ok'], got['reason'], got['benchmark'], got.get('server')) == (
        want['ok'], None, want['benchmark'], want.get('server'))
    assert smoke.benchmark_may_have_lost(case['benchmark']) is want['may_have_lost']
    assert 'benchmark' not in before and got['checks'] == before['checks']
