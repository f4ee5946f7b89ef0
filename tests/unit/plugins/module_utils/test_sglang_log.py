# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'sglang_log.yml')))


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_case(case):
    res = sglang_log.classify_lines(case['lines'].split('\n'))
    exp = case['expect']
    for key in ('ready', 'milestone', 'milestone_detail', 'reason'):
        if key in exp:
            assert res[key] == exp[key], (key, res)
    if 'evidence0' in exp:
        assert res['evidence'], res
        assert exp['evidence0'] in res['evidence'][0], res['evidence']
    for sub in exp.get('evidence_has', []):
        assert any(sub in e for e in res['evidence']), (sub, res['evidence'])


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_streaming_matches_batch(case):
    """Feeding the raw text in odd chunks through feed_text line by line gives the same result."""
    st = sglang_log.LogState()
    for line in case['lines'].split('\n'):
        st.feed_text(line + '\n')
    batch = sglang_log.classify_lines(case['lines'].split('\n'))
    assert st.to_dict()['reason'] == batch['reason']
    assert st.to_dict()['milestone'] == batch['milestone']
    assert st.evidence() == batch['evidence']


def test_tail_is_bounded():
    st = sglang_log.LogState(tail_size=3)
    st.feed_lines(['a %d' % i for i in range(10)])
    assert st.tail() == ['a 7', 'a 8', 'a 9']
    assert st.lines == 10


def test_classify_line_kinds():
    assert sglang_log.classify_line(sglang_log.READY_LINE)['kind'] == 'ready'
    assert sglang_log.classify_line('Traceback (most recent call last):')['kind'] == 'traceback'
    assert sglang_log.classify_line('ValueError: x')['kind'] == 'exception'
    assert sglang_log.classify_line('  File "/x.py", line 3, in f')['kind'] == 'other'
    assert sglang_log.classify_line('Exception in thread Thread-1:')['kind'] == 'other'


def test_extra_patterns():
    extra = sglang_log.compile_patterns(['MY KERNEL EXPLODED', {'regex': 'bad numbers', 'reason': 'nan'}])
    st = sglang_log.LogState(extra_fatal=extra)
    st.feed('all fine')
    assert st.reason is None
    st.feed('bad numbers here')
    assert st.reason == 'nan'
    st2 = sglang_log.LogState(extra_fatal=extra)
    st2.feed('MY KERNEL EXPLODED at 0x1')
    assert st2.reason == 'crashed'
    assert st2.evidence()[0] == 'MY KERNEL EXPLODED at 0x1'


def test_strip_prefix():
    assert sglang_log.strip_prefix('[2026-05-01 12:00:00 TP3] RuntimeError: x') == 'RuntimeError: x'
    assert sglang_log.strip_prefix('no prefix') == 'no prefix'


def test_member_rank_is_ready_when_its_dummy_health_server_starts():
    line = '[2026-11-29 20:41:07] Starting dummy health check server at 0.0.0.0:30000'
    member = sglang_log.LogState()
    member.feed('[2026-11-29 20:41:02 TP8] Load weight end. elapsed=1.02 s, type=Qwen3MoeForCausalLM')
    assert not member.ready and member.milestone == 'load_end'
    member.feed(line)
    assert member.ready and member.ready_line == line and member.milestone == 'ready'
    head = sglang_log.LogState()           # rank 0 (and a single host) still needs the real ready line
    head.feed('[2026-11-29 20:41:07] Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)')
    assert not head.ready
