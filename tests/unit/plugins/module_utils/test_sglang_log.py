# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, 'data')
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'sglang_log.yml')))
# a log line too long for the YAML file is written over several, each but the last ending in a backslash
for _case in CASES:
    if isinstance(_case.get('lines'), str):
        _case['lines'] = _case['lines'].replace('\\\n', '')


def case_lines(case):
    """The case's lines: its block, or a real log file (up to the first line that contains ``upto``)."""
    if 'file' in case:
        with io.open(os.path.join(DATA, case['file']), encoding='utf-8', errors='replace') as f:
            # the files keep LF line endings only: a carriage return of the real output (a tqdm bar) is written \r
            lines = f.read().replace('\\r', '\r').split('\n')
    else:
        lines = case['lines'].split('\n')
    if case.get('upto'):
        hits = [i for i, line in enumerate(lines) if case['upto'] in line]
        assert hits, 'upto %r is in no line of the case' % case['upto']
        lines = lines[:hits[0] + 1]
    return lines


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_case(case):
    res = sglang_log.classify_lines(case_lines(case))
    exp = case['expect']
    for key in ('ready', 'milestone', 'milestone_detail', 'reason'):
        if key in exp:
            assert res[key] == exp[key], (key, res)
    if 'evidence0' in exp:
        assert res['evidence'], res
        assert exp['evidence0'] in res['evidence'][0], res['evidence']
    for sub in exp.get('evidence_has', []):
        assert any(sub in e for e in res['evidence']), (sub, res['evidence'])
    for sub in exp.get('evidence_not', []):
        assert not res['evidence'] or sub not in res['evidence'][0], (sub, res['evidence'])
    if 'child_exit' in exp:
        if exp['child_exit'] is None:
            assert res['child_exit'] is None, res['child_exit']
        else:
            assert res['child_exit'] is not None, res
            for key, value in exp['child_exit'].items():
                assert res['child_exit'][key] == value, (key, res['child_exit'])


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_streaming_matches_batch(case):
    """Feeding the raw text in odd chunks through feed_text line by line gives the same result."""
    lines = case_lines(case)
    st = sglang_log.LogState()
    for line in lines:
        st.feed_text(line + '\n')
    batch = sglang_log.classify_lines(lines)
    assert st.to_dict()['reason'] == batch['reason']
    assert st.to_dict()['milestone'] == batch['milestone']
    assert st.evidence() == batch['evidence']
    assert st.to_dict()['child_exit'] == batch['child_exit']


def test_every_real_log_has_a_case():
    real = sorted(name for name in os.listdir(os.path.join(DATA, 'sglang-0.5.23')) if name.endswith('.log'))
    used = set(os.path.basename(c['file']) for c in CASES if 'file' in c)
    assert [name for name in real if name not in used] == []


@pytest.mark.parametrize('name, first', [
    ('tp1_kill9sched.log', 'Subprocess scheduler_0 (pid=18252) crashed with exit code -9'),
    ('tp1_kill9sched_b.log', 'Subprocess scheduler_0 (pid=23857) crashed with exit code -9'),
    ('nn2_kill_node1.log', 'Scheduler or DataParallelController 24020 terminated with -9'),
])
def test_a_dead_scheduler_decides_at_its_first_line(name, first):
    """Real 0.5.23: the verdict comes with the first line about the dead scheduler, not ~7 s later with the main
    process's end; nothing before that line is fatal."""
    st = sglang_log.LogState()
    with io.open(os.path.join(DATA, 'sglang-0.5.23', name), encoding='utf-8') as f:
        lines = f.read().split('\n')
    for line in lines:
        before = st.reason
        st.feed_text(line + '\n')
        if first in line:
            assert before is None and st.reason == 'killed'
            assert first in st.evidence()[0]
            assert st.child_exit['signal'] == 9 and st.child_exit['signal_name'] == 'KILL'
            break
    else:
        pytest.fail('%s has no line %r' % (name, first))


@pytest.mark.parametrize('log_reason, sig, result, want', [
    ('killed', None, 'oom-kill', 'oom'),       # a scheduler SIGKILLed, systemd says the OOM killer did it
    ('killed', None, 'success', 'killed'),     # the main process still lives (0.5.23 lingers ~7 s)
    ('killed', 9, 'signal', 'killed'),
    ('killed', None, 'exit-code', 'killed'),   # "Rank N scheduler died during initialization (exit code: -9)", status 1
    ('crashed', 9, 'oom-kill', 'crashed'),     # a traceback says why; the OOM mark does not override it
    ('oom', 9, None, 'oom'),
    ('hang', 9, 'signal', 'hang'),
    (None, 9, 'oom-kill', 'oom'),
    (None, 9, 'signal', 'killed'),
    (None, None, 'exit-code', 'crashed'),
    ('unhealthy', 9, None, 'killed'),
    ('unhealthy', None, None, 'crashed'),
])
def test_final_reason(log_reason, sig, result, want):
    assert sglang_log.final_reason(log_reason, sig, result) == want


@pytest.mark.parametrize('line, want', [
    ('[2026-12-01 15:13:22] Subprocess scheduler_0 (pid=18252) crashed with exit code -9. Triggering SIGQUIT for '
     'cleanup...', {'name': 'scheduler_0', 'pid': 18252, 'exit_code': -9, 'signal': 9, 'reason': 'killed'}),
    ('Subprocess scheduler_2 (pid=5) crashed with exit code 1. Triggering SIGQUIT for cleanup...',
     {'name': 'scheduler_2', 'exit_code': 1, 'signal': None, 'signal_name': None, 'reason': 'crashed'}),
    ('Subprocess scheduler_0 (pid=5) crashed with exit code -15. Triggering SIGQUIT for cleanup...',
     {'signal': 15, 'signal_name': 'TERM', 'reason': 'killed'}),
    ('RuntimeError: Rank 7 scheduler died during initialization (exit code: None). If exit code is -9 (SIGKILL), a '
     'common cause is the OS OOM killer.', {'name': 'scheduler_7', 'exit_code': None, 'reason': 'crashed'}),
    ('[2026-12-01 15:20:15] Scheduler or DataParallelController 23415 terminated with 0', None),
    ('[2026-12-01 15:20:15] kill_process_tree called: parent_pid=23398, include_parent=False, pid=23398', None),
])
def test_child_exit_of(line, want):
    got = sglang_log.child_exit_of(line)
    if want is None:
        assert got is None
    else:
        assert got is not None and dict((k, got[k]) for k in want) == want


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


@pytest.mark.parametrize('line', [
    '[2026-12-01 15:20:08] Dummy health check server started in background thread at 127.0.0.1:31001',  # 0.5.23
    '[2026-11-29 20:41:07] Starting dummy health check server at 0.0.0.0:30000',                          # older
])
def test_member_rank_is_ready_when_its_dummy_health_server_starts(line):
    member = sglang_log.LogState()
    member.feed('[2026-11-29 20:41:02 TP8] Load weight end. elapsed=1.02 s, type=Qwen3MoeForCausalLM')
    assert not member.ready and member.milestone == 'load_end'
    member.feed(line)
    assert member.ready and member.ready_line == line and member.milestone == 'ready'
    head = sglang_log.LogState()           # rank 0 (and a single host) still needs the real ready line
    head.feed('[2026-11-29 20:41:07] Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)')
    assert not head.ready


# The lines SGLang 0.5.23 itself writes for the milestones whose older-release text is also matched: where the wheel
# builds the line (site-packages relative path, line, the literal it starts with), and a line as it prints it.
SITE = os.environ.get('LLMSERVE_LAB_SITE') or '/var/lib/llmserve-lab/sglang-0.5.23/lib/python3.11/site-packages'
WHEEL_LINES = [
    ('sglang/srt/distributed/bootstrap.py', 115, 'Init parallel begin.', 'init_parallel',
     '[2026-12-03 12:00:00 TP0] Init parallel begin.'),
    ('sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py', 759,
     'Capture {capture_name} {graph_backend[model_runner.device]} begin.', 'cuda_graph_begin',
     '[2026-12-03 12:00:30 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, '
     'avail mem=10.50 GB'),
    ('sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py', 685, 'Capture {capture_name} CUDA graph begin.',
     'cuda_graph_begin', '[2026-12-03 12:00:20 TP0] Capture target prefill CUDA graph begin. backend=breakable, '
     'num_tokens=[4, 8], avail mem=10.60 GB'),
    ('sglang/srt/speculative/eagle_worker_v2.py', 515, 'Capture draft decode CUDA graph begin.', 'cuda_graph_begin',
     '[2026-12-03 12:00:40 TP0] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=4, bs=[1, 2], '
     'avail mem=10.40 GB'),
    ('sglang/srt/utils/common.py', 3684, 'Dummy health check server started in background thread at', 'ready',
     '[2026-12-03 12:01:00] Dummy health check server started in background thread at 0.0.0.0:30000'),
]


WHEEL_IDS = [w[3] + ':' + w[0].rsplit('/', maxsplit=1)[-1] for w in WHEEL_LINES]


@pytest.mark.parametrize('path, lineno, literal, milestone, printed', WHEEL_LINES, ids=WHEEL_IDS)
def test_the_real_0_5_23_line_is_the_milestone(path, lineno, literal, milestone, printed):
    """The milestone is read from the line SGLang 0.5.23 prints (its source checked in the installed wheel when the
    lab's real SGLang is on this machine), not only from the older release's."""
    assert literal.split('{')[0] in printed
    assert sglang_log.milestone_of(sglang_log.strip_prefix(printed))[0] == milestone
    source = os.path.join(SITE, path)
    if not os.path.isfile(source):
        pytest.skip('the real SGLang 0.5.23 is not installed here (make setup-real-sglang)')
    with io.open(source, encoding='utf-8') as handle:
        code = handle.read().splitlines()[lineno - 1]
    assert literal in code, '%s:%d is now %r' % (path, lineno, code)
