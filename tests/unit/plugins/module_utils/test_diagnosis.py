# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import diagnosis

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, '..', '..', '..', '..')
SIGNATURES = os.path.join(ROOT, 'roles', 'backend_trial', 'files', 'failure_signatures.yml')
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'diagnosis.yml'), encoding='utf-8'))
TABLE = yaml.safe_load(open(SIGNATURES, encoding='utf-8'))['signatures']


def run(case, table=None):
    return diagnosis.diagnose(table or TABLE, case['entry'], case.get('results') or [], arch=case.get('arch'),
                              candidate=case.get('candidate'), phase=case.get('phase'))


def test_shipped_table_is_valid():
    compiled = diagnosis.validate(TABLE)
    assert len(compiled) == len(TABLE) > 20
    for sig in compiled:
        assert sig['references'], sig['id']


@pytest.mark.parametrize('case', CASES['cases'], ids=[c['name'] for c in CASES['cases']])
def test_diagnose(case):
    d = run(case)
    assert d['id'] == case['expect'], d
    for key in ('explanation', 'references', 'next_step', 'matched'):
        assert key in d
    assert d['explanation'] and d['next_step']
    for want in case.get('lines') or []:
        assert any(want in line for line in d['matched'].get('lines', [])), d['matched']
    for want in case.get('unmatched') or []:
        assert want in d['lines'], d['lines']


def test_every_signature_has_a_case():
    covered = set(c['expect'] for c in CASES['cases'])
    missing = [s['id'] for s in TABLE if s['id'] not in covered]
    assert not missing, 'signatures without a case in cases/diagnosis.yml: %s' % missing


def test_not_failed_has_no_diagnosis():
    assert diagnosis.diagnose(TABLE, {'outcome': 'ready'}) is None
    assert diagnosis.diagnose(TABLE, {'outcome': 'skipped', 'reason': 'arch_unsupported'}) is None


def test_first_match_wins_and_data_only_extension():
    extra = [{'id': 'my_site_rule', 'match': {'reason': 'crashed', 'lines': ['KeyError: .model\\.layers']},
              'explanation': 'the checkpoint does not match the code', 'references': ['our wiki'],
              'next_step': 'download the checkpoint again'}]
    case = [c for c in CASES['cases'] if c['name'].startswith('crash with a python traceback')][0]
    assert run(case)['id'] == 'crashed_traceback'
    d = run(case, extra + TABLE)
    assert d['id'] == 'my_site_rule' and d['references'] == ['our wiki']
    assert d['matched']['reason'] == 'crashed'


def test_value_matching():
    assert diagnosis.value_matches(None, None)
    assert not diagnosis.value_matches(None, 'auto')
    assert diagnosis.value_matches([None, 'auto'], None)
    assert diagnosis.value_matches({'not': 'sm100'}, 'sm120')
    assert not diagnosis.value_matches({'not': ['sm100', 'sm120']}, 'sm120')
    assert diagnosis.value_matches(9, '9') and diagnosis.value_matches(True, True)


def test_context_reads_results():
    ctx = diagnosis.context({'reason': 'killed'}, [{'status': 'killed', 'signal': '9', 'evidence': ['x; the log is empty']}],
                            arch='sm120', candidate={'moe_runner_backend': 'flashinfer_trtllm'}, phase='screen')
    assert ctx['signal'] == 9 and ctx['log_empty'] is True and ctx['phase'] == 'screen'
    assert ctx['moe_runner_backend'] == 'flashinfer_trtllm' and ctx['attention_backend'] is None


@pytest.mark.parametrize('case', CASES['invalid'], ids=[c['error'] for c in CASES['invalid']])
def test_invalid_tables(case):
    with pytest.raises(diagnosis.SignatureError) as err:
        diagnosis.validate(case['table'])
    assert case['error'] in str(err.value)
