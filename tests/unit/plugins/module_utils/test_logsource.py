# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import logsource

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'logsource.yml'), encoding='utf-8'))


@pytest.mark.parametrize('case', CASES['file'], ids=[c['name'] for c in CASES['file']])
def test_file(tmp_path, case):
    path = str(tmp_path / 'log')
    open(path, 'w').close()
    src = logsource.FileLog(path)
    got = []
    for chunk in case['writes']:
        with open(path, 'a') as f:
            f.write(chunk)
        got.append([line for line, _ts in src.poll(0)])
    assert got == case['polls']


def test_file_since_rotation_and_cursor(tmp_path):
    path = str(tmp_path / 'log')
    with open(path, 'w') as f:
        f.write('old run\nnew run\n')
    src = logsource.FileLog(path, since='8')
    lines = src.poll(0)
    assert [x for x, _t in lines] == ['new run'] and lines[0][1] is not None   # caught-up lines carry the mtime
    cur = src.cursor()
    assert cur.endswith(':16')
    os.remove(path)
    with open(path, 'w') as f:
        f.write('rotated\n')
    assert [x for x, _t in src.poll(0)] == ['rotated']
    # a cursor from another inode means the file was replaced: read it from 0
    src2 = logsource.FileLog(path, cursor='1:99', since='8')
    assert [x for x, _t in src2.poll(0)] == ['rotated']


def test_file_since_must_be_offset(tmp_path):
    with pytest.raises(ValueError):
        logsource.FileLog(str(tmp_path / 'x'), since='yesterday')


@pytest.mark.parametrize('case', CASES['journal'], ids=[c['name'] for c in CASES['journal']])
def test_journal_poll(case):
    calls = []

    def run_command(argv):
        calls.append(argv)
        return 0, case['output'] if len(calls) == 1 else '', ''
    src = logsource.JournalLog(run_command, 'journalctl', 'u.service', 'inv9', mode='poll')
    lines = src.poll(0)
    assert [[x, t] for x, t in lines] == case['lines']
    assert src.cursor() == case['cursor']
    assert '_SYSTEMD_INVOCATION_ID=inv9' in calls[0]
    src.poll(0)
    assert calls[1][-2:] == ['--after-cursor', case['cursor']]


def test_journal_without_invocation_uses_unit_and_since():
    calls = []
    src = logsource.JournalLog(lambda argv: calls.append(argv) or (0, '', ''), 'journalctl', 'u.service', None,
                               since='@1700000000', mode='poll')
    src.poll(0)
    assert '_SYSTEMD_UNIT=u.service' in calls[0] and calls[0][calls[0].index('--since') + 1] == '@1700000000'


def test_journal_sync_asks_journald_to_catch_up():
    calls = []

    def run(argv):
        calls.append(list(argv))
        return 0, '', ''

    log = logsource.JournalLog(run, '/usr/bin/journalctl', 'sglang.service', 'abc123', mode='poll')
    log.last_cursor = 's=1'
    log.sync()
    assert calls[-1] == ['/usr/bin/journalctl', '--sync']
    # the next read goes to the journal itself, after the last line already seen
    log.poll(0)
    assert calls[-1][-2:] == ['--after-cursor', 's=1'] and log.mode == 'poll'
