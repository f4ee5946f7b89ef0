# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import arch_matrix

HERE = os.path.dirname(__file__)
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'arch_matrix.yml')))
ARGS = yaml.safe_load(open(os.path.join(HERE, '..', '..', '..', 'data', 'sglang', 'server-args-0.5.23.json')))


def case_id(case):
    return '%s=%s@%s' % (case['flag'], case['value'], case['arch'])


@pytest.mark.parametrize('case', CASES['classify'], ids=[case_id(c) for c in CASES['classify']])
def test_classify(case):
    result = arch_matrix.classify(case['flag'], case['value'], case['arch'])
    assert result['verdict'] == case['verdict']
    if case['verdict'] != 'ok':
        assert result['sources'], 'every finding names its sources'
    if 'reason' in case:
        assert case['reason'] in result['reason'] + ' '.join(result['sources'])


@pytest.mark.parametrize('case', CASES['check'], ids=[case_id(c) for c in CASES['check']])
def test_check(case):
    ok, reason = arch_matrix.check(case['flag'], case['value'], case['arch'])
    assert ok is case['ok']


def test_every_rule_names_a_real_flag_and_choice():
    """The matrix must not drift from SGLang's own flag table (0.5.23)."""
    by_flag = {}
    for option in ARGS['options']:
        for flag in option['flags']:
            by_flag[flag] = option
    for rule in arch_matrix.RULES:
        assert rule['flag'] in by_flag, rule['flag']
        assert rule['value'] in by_flag[rule['flag']]['choices'], (rule['flag'], rule['value'])
        assert rule['sources'] and rule['reason']
        assert sum(1 for k in ('only', 'not_on', 'bad_on', 'warn_on') if k in rule) == 1


def test_supported_archs():
    assert arch_matrix.supported_archs('--moe-runner-backend', 'flashinfer_trtllm') == ['sm100']
    assert arch_matrix.supported_archs('--moe-runner-backend', 'flashinfer_cutlass') is None
    found = arch_matrix.check_many([('--moe-runner-backend', 'flashinfer_cutedsl'), ('--attention-backend', None),
                                    ('--fp4-gemm-backend', 'flashinfer_cudnn')], 'sm120')
    assert [f['verdict'] for f in found] == ['known_bad']
