# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import screen

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'screen.yml'), encoding='utf-8'))


@pytest.mark.parametrize('case', CASES['args'], ids=[c['name'] for c in CASES['args']])
def test_screen_args(case):
    assert screen.screen_args(case['extra_args'], case['layers']) == case['expect']


@pytest.mark.parametrize('case', CASES['bad_args'], ids=[c['error'] for c in CASES['bad_args']])
def test_screen_args_errors(case):
    with pytest.raises(ValueError) as err:
        screen.screen_args(case['extra_args'], case['layers'])
    assert case['error'] in str(err.value)


@pytest.mark.parametrize('case', CASES['outcomes'], ids=[c['name'] for c in CASES['outcomes']])
def test_outcome(case):
    res = screen.outcome(case['await'], case.get('probe'), case.get('seconds', 1.0), case.get('recheck'), layers=4)
    want = case['expect']
    assert res['outcome'] == want['outcome'] and res['reason'] == want['reason'], res
    assert want['evidence'] in res['evidence'], res
    assert res['layers'] == 4
    for key in ('seconds', 'milestone'):
        if key in want:
            assert res[key] == want[key]


@pytest.mark.parametrize('case', CASES['wanted']['cases'], ids=[c['name'] for c in CASES['wanted']['cases']])
def test_wanted(case):
    got = screen.wanted(case['candidate'], {'enabled': case['enabled']}, CASES['wanted']['record'], 'fp1', '0.5.23')
    assert got is case['expect']


def test_outcome_layers_are_a_number_also_from_a_templated_string():
    # ansible-core < 2.19 hands the setting over as '4'
    ready = {'status': 'ready', 'reason': None, 'milestone': 'ready', 'evidence': []}
    assert screen.outcome(ready, {'ok': True}, 1.0, None, layers='4')['layers'] == 4
    assert screen.outcome(ready, {'ok': True}, 1.0, None, layers=None)['layers'] is None
