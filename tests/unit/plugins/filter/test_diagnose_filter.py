# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diagnose filter hands the installed flag table to the diagnosis (controller side: ansible.errors is there)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.llmserve.sglang.plugins.filter import diagnose as diagnose_filter
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags

HERE = os.path.join(os.path.dirname(__file__), '..', 'module_utils')
ROOT = os.path.join(HERE, '..', '..', '..', '..')
SIGNATURES = os.path.join(ROOT, 'roles', 'backend_trial', 'files', 'failure_signatures.yml')
DUMP = os.path.join(ROOT, 'tests', 'data', 'sglang', 'server-args-0.5.23.json')
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'diagnosis.yml'), encoding='utf-8'))
TABLE = yaml.safe_load(open(SIGNATURES, encoding='utf-8'))['signatures']


def test_the_filter_passes_the_flag_table():
    case = [c for c in CASES['cases'] if c['name'].startswith('hang after load, advice for sglang 0.5.23')][0]
    with open(DUMP, encoding='utf-8') as f:
        options = json.dumps(sglang_flags.compact_options(json.load(f)['options']))
    d = diagnose_filter.diagnose(case['entry'], TABLE, results=case['results'], arch='sm120', flags=options,
                                 sglang_version='0.5.23')
    assert '--cuda-graph-backend-decode=disabled' in d['next_step'] and d['flag_notes']
    assert 'flag_notes' not in diagnose_filter.diagnose(case['entry'], TABLE, results=case['results'])
    with pytest.raises(AnsibleFilterError):
        diagnose_filter.diagnose(case['entry'], TABLE, flags=42)


def test_with_shipped_puts_the_users_signatures_first_and_reads_the_shipped_table_once():
    extra = [{'id': 'mine', 'match': {'reason': 'crashed'}, 'explanation': 'x', 'references': [], 'next_step': 'y'}]
    table = diagnose_filter.with_shipped(extra)
    assert [s['id'] for s in table[:1]] == ['mine']
    assert [s['id'] for s in table[1:]] == [s['id'] for s in diagnose_filter.shipped_table()]
    assert diagnose_filter.shipped_table() is diagnose_filter.shipped_table()  # checked and compiled once
    assert len(diagnose_filter.with_shipped(None)) == len(diagnose_filter.load_default())
    with pytest.raises(AnsibleFilterError, match='bad failure signature'):
        diagnose_filter.with_shipped([{'id': 'x', 'match': {'nope': 1}}])
