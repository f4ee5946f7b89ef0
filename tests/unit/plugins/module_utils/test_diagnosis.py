# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import diagnosis
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, '..', '..', '..', '..')
SIGNATURES = os.path.join(ROOT, 'roles', 'backend_trial', 'files', 'failure_signatures.yml')
DUMP = os.path.join(ROOT, 'tests', 'data', 'sglang', 'server-args-0.5.23.json')
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'diagnosis.yml'), encoding='utf-8'))
TABLE = yaml.safe_load(open(SIGNATURES, encoding='utf-8'))['signatures']


def flag_table(name):
    """A flag table of the cases' ``tables``: the 0.5.23 dump, compacted, with flags removed or added."""
    spec = CASES['tables'][name]
    with open(DUMP, encoding='utf-8') as f:
        dump = json.load(f)
    options = dump['options']
    if spec.get('compact'):
        options = sglang_flags.compact_options(options)
    gone = set(spec.get('without') or ())
    options = [o for o in options if not gone & set(o['flags'])] + list(spec.get('add') or [])
    return sglang_flags.FlagTable(options, version=str(spec.get('version') or dump['sglang_version']))


def run(case, table=None):
    flags = flag_table(case['flags']) if case.get('flags') else None
    return diagnosis.diagnose(table or TABLE, case['entry'], case.get('results') or [], arch=case.get('arch'),
                              candidate=case.get('candidate'), phase=case.get('phase'), flags=flags)


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
    for want in case.get('explanation_has') or []:
        assert want in d['explanation'], d['explanation']
    for want in case.get('next_step_has') or []:
        assert want in d['next_step'], d['next_step']
    for want in case.get('next_step_not') or []:
        assert want not in d['next_step'], d['next_step']
    if case.get('flags'):
        assert isinstance(d['flag_notes'], list)
        if not case.get('flag_notes_has'):
            assert d['flag_notes'] == []
        for want in case.get('flag_notes_has') or []:
            assert any(want in note for note in d['flag_notes']), d['flag_notes']
    else:
        assert 'flag_notes' not in d


def test_every_signature_has_a_case():
    covered = set(c['expect'] for c in CASES['cases'])
    missing = [s['id'] for s in TABLE if s['id'] not in covered]
    assert not missing, 'signatures without a case in cases/diagnosis.yml: %s' % missing


def test_every_builtin_signature_has_a_case_and_a_place():
    covered = set(c['expect'] for c in CASES['cases'])
    ids = [s['id'] for s in TABLE]
    for before, sig in diagnosis.BUILTIN_SIGNATURES:
        assert sig['id'] in covered, 'built-in signature without a case: %s' % sig['id']
        assert before in ids, '%s goes before %s, which the shipped table lacks' % (sig['id'], before)
        assert sig['id'] not in ids
    merged = [s['id'] for s in diagnosis.with_builtins(diagnosis.validate(TABLE))]
    for before, sig in diagnosis.BUILTIN_SIGNATURES:
        assert merged.index(sig['id']) < merged.index(before)


def test_a_table_entry_with_a_builtin_id_replaces_it():
    case = [c for c in CASES['cases'] if c['expect'] == 'gpu_memory_unbalanced'][0]
    mine = [{'id': 'gpu_memory_unbalanced', 'match': {'lines': ['memory capacity is unbalanced']},
             'explanation': 'ours', 'references': ['our wiki'], 'next_step': 'call the on-call'}]
    d = run(case, mine + TABLE)
    assert d['id'] == 'gpu_memory_unbalanced' and d['explanation'] == 'ours'
    assert [s['id'] for s in diagnosis.with_builtins(diagnosis.validate(mine))].count('gpu_memory_unbalanced') == 1
    d = diagnosis.diagnose(TABLE, case['entry'], case['results'], builtin=False)
    assert d['id'] == 'host_oom_killer'     # without the built-ins the table alone misreads it


@pytest.mark.parametrize('case', CASES['advice'], ids=[c['name'] for c in CASES['advice']])
def test_check_advice(case):
    text, notes = diagnosis.check_advice(case['text'], flag_table(case['table']), keep=case.get('keep') or ())
    assert text == case['want']
    if case['want'] == case['text']:
        assert notes == []
    for want in case.get('notes_has') or []:
        assert any(want in note for note in notes), notes


def test_flag_table_forms():
    with open(DUMP, encoding='utf-8') as f:
        dump = json.load(f)
    text = json.dumps(sglang_flags.compact_options(dump['options']))
    for value in (dump, dump['options'], text, sglang_flags.FlagTable(dump['options'], '0.5.23')):
        table = diagnosis.flag_table(value, version='0.5.23')
        assert '--cuda-graph-max-bs-decode' in table and '--cuda-graph-max-bs' not in table
    assert diagnosis.flag_table(dump).version == '0.5.23'
    assert diagnosis.flag_table(None) is None
    assert diagnosis.flag_table('') is None and diagnosis.flag_table([]) is None    # nothing to check against
    with pytest.raises(ValueError):
        diagnosis.flag_table('not json')


def test_context_reads_the_dead_child():
    ctx = diagnosis.context({'reason': 'killed'}, [{'status': 'killed', 'signal': None,
                                                    'child_exit': {'name': 'scheduler_0', 'exit_code': -9, 'signal': 9}}])
    assert ctx['child_signal'] == 9 and ctx['child_exit_code'] == -9 and ctx['signal'] is None


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
