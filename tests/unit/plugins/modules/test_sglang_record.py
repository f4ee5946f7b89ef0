# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_record: the record written atomically, the lock given back, the trials' marker removed (a change)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.llmserve.sglang.plugins.modules import sglang_record
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import run_mocked

GPU = {'name': 'NVIDIA RTX PRO 6000 Blackwell Server Edition', 'compute_cap': '12.0', 'count': 8}
RESULT = {'name': 'known-good', 'config_key': 'moe=flashinfer_cutlass', 'args': ['--moe-runner-backend', 'flashinfer_cutlass'],
          'outcome': 'ready', 'reason': None, 'evidence': None, 'seconds': 3.2}


def no_commands(argv):
    raise AssertionError('sglang_record runs no command, got %r' % argv)


@pytest.fixture
def state(tmp_path):
    lock = tmp_path / 'deploy.lock'
    lock.mkdir()
    (lock / 'owner.json').write_text('{"pid": 1}\n')
    marker = tmp_path / 'trial-in-progress'
    marker.write_text('')
    return {'path': str(tmp_path / 'record.json'), 'fingerprint': 'fp-1', 'gpu': GPU, 'sglang_version': '0.5.23',
            'results': [RESULT], 'selected': {'name': 'known-good', 'config_key': RESULT['config_key']},
            'release_lock': str(lock), 'trial_marker': str(marker)}


def run(args, monkeypatch, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    return run_mocked(sglang_record.main, args, monkeypatch, no_commands)


def test_writes_record_removes_marker_and_lock(state, monkeypatch):
    result, failed, dummy = run(state, monkeypatch)
    assert not failed, result
    assert result['changed'] and result['marker_removed']
    assert not os.path.exists(state['trial_marker']) and not os.path.exists(state['release_lock'])
    with open(state['path']) as handle:
        text = handle.read()
    record = json.loads(text)
    assert record['selected']['name'] == 'known-good' and len(record['entries']) == 1
    assert text == json.dumps(record, indent=1, sort_keys=True)  # the record's layout, no newline at the end
    assert stat.S_IMODE(os.stat(state['path']).st_mode) == 0o644
    assert os.listdir(os.path.dirname(state['path'])) == ['record.json']  # no temporary file left

    # again, the same results and no marker: the record does not grow, nothing to remove, no change
    result, failed, dummy = run(dict(state, results=[]), monkeypatch)
    assert not failed and not result['changed'] and not result['marker_removed']


def test_marker_alone_is_a_change(state, monkeypatch):
    run(state, monkeypatch)
    open(state['trial_marker'], 'w').close()  # an interrupted run's marker, the record already up to date
    result, failed, dummy = run(dict(state, results=[]), monkeypatch)
    assert not failed and result['changed'] and result['marker_removed']
    assert not os.path.exists(state['trial_marker'])


def test_check_mode_removes_nothing(state, monkeypatch):
    result, failed, dummy = run(state, monkeypatch, check=True)
    assert not failed and result['changed'] and result['marker_removed']
    assert os.path.exists(state['trial_marker']) and os.path.isdir(state['release_lock'])
    assert not os.path.exists(state['path'])


def test_bad_record_is_kept(state, monkeypatch):
    with open(state['path'], 'w') as handle:
        handle.write('{not json')
    result, failed, dummy = run(state, monkeypatch)
    assert failed and 'not valid JSON' in result['msg'] and state['path'] in result['msg']
    assert os.path.exists(state['trial_marker'])  # nothing removed when the record cannot be written
    with open(state['path']) as handle:
        assert handle.read() == '{not json'
