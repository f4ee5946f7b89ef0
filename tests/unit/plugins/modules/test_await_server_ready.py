# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import time

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.llmserve.sglang.plugins.modules import await_server_ready as mod
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log

HU = 'ansible_collections.llmserve.sglang.plugins.module_utils.sglang_http.open_url'
READY = '[2026-05-01 12:00:55] The server is fired up and ready to roll!'
CRASH = '''[2026-05-01 12:00:30 TP0] Load weight end. elapsed=25.1 s
[2026-05-01 12:01:00 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/x/flashinfer/fused_moe/core.py", line 2120, in trtllm_fp4_block_scale_moe
    return op(
RuntimeError: trtllm_fp4_block_scale_moe requires 10.x architecture (got sm120)
[2026-05-01 12:01:00] Received sigquit from a child process. It usually means the child failed.
'''


class Resp(object):
    status = 200
    headers = {}

    def read(self):
        return b''

    def getcode(self):
        return 200


def ok_open(url, **kw):
    ok_open.calls.append((url, kw))
    return Resp()


def unhealthy_open(url, **kw):
    raise HTTPError(url, 503, 'Service Unavailable', {}, io.BytesIO(b''))


def refused_open(url, **kw):
    raise URLError(ConnectionRefusedError(111, 'Connection refused'))


def write(path, text, age=0):
    with open(path, 'w') as f:
        f.write(text)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))


@pytest.fixture(autouse=True)
def bins(mocker):
    mocker.patch.object(AnsibleModule, 'get_bin_path', side_effect=lambda name, *a, **k: '/usr/bin/' + name)


def test_ready_from_log_file(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), 'Load weight begin\n' + READY + '\n')
    ok_open.calls = []
    mocker.patch(HU, side_effect=ok_open)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'port': 31000, 'api_key': 'k3y', 'timeout': 20})
    assert res['status'] == 'ready' and res['reason'] is None and res['changed'] is False
    assert res['milestone'] == 'ready'
    url, kw = ok_open.calls[0]
    assert url == 'http://127.0.0.1:31000/health_generate'
    assert kw['headers']['Authorization'] == 'Bearer k3y'
    assert 'k3y' not in json.dumps(res)


def test_crash_line_with_live_process(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), CRASH)
    mocker.patch(HU, side_effect=refused_open)
    t0 = time.time()
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'timeout': 20})
    assert res['status'] == 'crashed' and res['reason'] == 'crashed'
    assert 'requires 10.x architecture' in res['evidence'][0]
    assert any('Scheduler hit an exception' in e for e in res['evidence'])
    assert res['log_tail'][-1].startswith('[2026-05-01 12:01:00] Received sigquit')
    assert time.time() - t0 < 10   # bounded (no timing assertion beyond "it returned")


def test_killed_unit_with_empty_journal(run_module, mocker):
    show = ('MainPID=0\nExecMainPID=4242\nActiveState=failed\nSubState=failed\nResult=signal\n'
            'ExecMainStatus=9\nExecMainCode=2\nInvocationID=abc123\nExecMainStartTimestampMonotonic=1\n')
    calls = []

    def run_command(self, argv, **kw):
        calls.append(argv)
        if argv[0].endswith('systemctl'):
            return 0, show, ''
        return 0, '', ''
    mocker.patch.object(AnsibleModule, 'run_command', run_command)
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'service_name': 'sglang-trial', 'journal_mode': 'poll', 'timeout': 1e9})
    assert res['status'] == 'killed' and res['signal'] == 9 and res['signal_name'] == 'KILL'
    assert res['log_said_anything'] is False
    assert 'the log is empty' in res['evidence'][0]
    assert res['evidence'][0].startswith('process 4242 ended')   # ExecMainPID: the PID is known after the death
    assert res['unit']['Result'] == 'signal'
    jc = [a for a in calls if a[0].endswith('journalctl')]
    assert jc and '_SYSTEMD_INVOCATION_ID=abc123' in jc[0]
    assert calls[0][:3] == ['/usr/bin/systemctl', 'show', '-p']
    assert calls[0][-1] == 'sglang-trial.service'


def test_oom_from_journal(run_module, mocker):
    show = ('MainPID=0\nActiveState=failed\nSubState=failed\nResult=signal\nExecMainStatus=9\nExecMainCode=2\n'
            'InvocationID=inv1\n')
    entries = [
        {'MESSAGE': '[2026-05-01 12:00:00 TP0] Load weight begin', '__CURSOR': 'c1', '__REALTIME_TIMESTAMP': '1'},
        {'MESSAGE': 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', '__CURSOR': 'c2',
         '__REALTIME_TIMESTAMP': '2'},
    ]
    seen = {'n': 0}

    def run_command(self, argv, **kw):
        if argv[0].endswith('systemctl'):
            return 0, show, ''
        seen['n'] += 1
        if '--after-cursor' in argv:
            return 0, '', ''
        return 0, '\n'.join(json.dumps(e) for e in entries) + '\n', ''
    mocker.patch.object(AnsibleModule, 'run_command', run_command)
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'service_name': 'sglang-trial.service', 'journal_mode': 'poll'})
    assert res['status'] == 'oom' and res['signal'] == 9
    assert 'CUDA out of memory' in res['evidence'][0]
    assert res['cursor'] == 'c2' and res['milestone'] == 'load_begin'


def test_systemd_oom_kill_result(run_module, mocker):
    show = 'MainPID=0\nActiveState=failed\nResult=oom-kill\nExecMainStatus=9\nExecMainCode=2\nInvocationID=i\n'
    mocker.patch.object(AnsibleModule, 'run_command',
                        lambda self, argv, **kw: (0, show, '') if argv[0].endswith('systemctl') else (0, '', ''))
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'service_name': 'x', 'journal_mode': 'poll'})
    assert res['status'] == 'oom'


def _child(code):
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, '-c', code])


def test_hang(tmp_path, run_module, mocker):
    """Silent and idle (a process that sleeps): hang after hang_timeout."""
    log = tmp_path / 'sglang.log'
    write(str(log), '[2026-05-01 12:00:00 TP0] Load weight begin\n', age=30)
    mocker.patch(HU, side_effect=refused_open)
    child = _child('import time; time.sleep(60)')
    try:
        res = run_module(mod, {'log_path': str(log), 'pid': child.pid, 'hang_timeout': 5, 'timeout': 1000})
    finally:
        child.kill()
        child.wait()
    assert res['status'] == 'hang' and res['milestone'] == 'load_begin'
    assert res['evidence'][0].startswith('no new log line for 5')
    assert 'no CPU or disk activity' in res['evidence'][0]


def test_silent_but_working_is_no_hang(tmp_path, run_module, mocker):
    """Silent but busy (a load whose progress is a tqdm bar, a JIT compile): never hang, only the overall timeout."""
    log = tmp_path / 'sglang.log'
    write(str(log), '[2026-05-01 12:00:00 TP0] Load weight begin\n', age=30)
    mocker.patch(HU, side_effect=refused_open)
    child = _child('while True: pass')
    try:
        res = run_module(mod, {'log_path': str(log), 'pid': child.pid, 'hang_timeout': 2, 'timeout': 6})
    finally:
        child.kill()
        child.wait()
    assert res['status'] == 'timeout', res


def test_step_returns_loading_then_continues(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), 'Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]\n')
    mocker.patch(HU, side_effect=refused_open)
    args = {'log_path': str(log), 'pid': os.getpid(), 'step': 0.3, 'timeout': 1000, 'start_time': time.time() - 42}
    res = run_module(mod, args)
    assert res['status'] == 'loading' and res['reason'] is None
    assert res['milestone'] == 'loading_shards' and res['milestone_detail'] == '50% (1/2)'
    assert 42 <= res['elapsed'] < 60 and res['seconds'] < 5
    with open(str(log), 'a') as f:
        f.write(READY + '\n')
    ok_open.calls = []
    mocker.patch(HU, side_effect=ok_open)
    args['cursor'] = res['cursor']
    res2 = run_module(mod, args)
    assert res2['status'] == 'ready'
    assert int(res2['cursor'].split(':')[1]) > int(res['cursor'].split(':')[1])


def test_timeout(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), 'Load weight begin\n')
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'timeout': 50, 'start_time': time.time() - 100})
    assert res['status'] == 'timeout' and 'not ready after 50' in res['evidence'][0]


def test_unhealthy(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    mocker.patch(HU, side_effect=unhealthy_open)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'unhealthy_timeout': 0.5})
    assert res['status'] == 'unhealthy' and res['health_status'] == 503
    assert '/health_generate answered 503' in res['evidence'][0]


def test_dead_pid_without_log(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), '')
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'log_path': str(log), 'pid': 2 ** 22 + 12345})
    assert res['status'] in ('crashed', 'killed') and res['log_said_anything'] is False


def test_check_mode_inspects_once(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), 'Load weight begin\n')
    mocker.patch(HU, side_effect=refused_open)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), '_ansible_check_mode': True})
    assert res['status'] == 'loading' and res['changed'] is False and res['seconds'] < 5


def test_bad_pattern_fails(tmp_path, run_module):
    res = run_module(mod, {'log_path': str(tmp_path / 'x'), 'fatal_patterns': ['(unclosed']})
    assert res['failed'] and 'invalid pattern' in res['msg']


def test_needs_service_or_log(run_module):
    res = run_module(mod, {'pid': 1})
    assert res['failed']


@pytest.mark.parametrize('props,dead', [
    ('ActiveState=active\nSubState=running\nMainPID=0\nInvocationID=a\n', True),
    ('ActiveState=activating\nSubState=auto-restart\nMainPID=0\nInvocationID=a\n', True),
    ('ActiveState=failed\nMainPID=0\nInvocationID=a\n', True),
    ('ActiveState=active\nSubState=running\nMainPID=1\nInvocationID=b\n', True),
    ('ActiveState=active\nSubState=running\nMainPID=1\nInvocationID=a\n', False),
])
def test_unit_dead(props, dead):
    class M(object):
        def run_command(self, argv):
            return 0, self.out, ''

        def fail_json(self, **kw):
            raise AssertionError(kw)
    m = M()
    m.out = 'ActiveState=active\nMainPID=1\nInvocationID=a\n'
    w = mod.UnitWatch(m, 'u.service', 'systemctl')
    m.out = props
    w.last_show = 0
    assert w.dead(time.time()) is dead


# --------------------------------------------------------------------------- the bound of one call, on a fake clock
class FakeClock(object):
    def __init__(self, t=1000000.0):
        self.t = t

    def __call__(self):
        return self.t


class QuietLog(object):
    """A log that gives ``lines`` ((text, seconds before the call)) on its first poll, then says nothing; each poll
    lets the fake clock run by the poll interval."""

    def __init__(self, clock, lines=()):
        self.clock = clock
        self.lines = [(text, clock.t - ago) for text, ago in lines]

    def poll(self, interval):
        self.clock.t += interval
        lines, self.lines = self.lines, []
        return lines


class RunningUnit(object):
    """A unit whose main process started ``up_for`` seconds before the call and stays alive."""
    pid = 4242

    def __init__(self, up_for):
        self.mono_start = time.monotonic() - up_for

    def started_monotonic(self):
        return self.mono_start

    def dead(self, now):
        return False


class FakeProbe(object):
    """/health_generate: answers 200 ``answer_after`` fake seconds after the first probe (None: never)."""

    def __init__(self, clock, answer_after):
        self.clock = clock
        self.answer_after = answer_after
        self.first = None
        self.ok = False
        self.last = None

    def kick(self, now):
        if self.first is None:
            self.first = now
        if self.answer_after is not None and now - self.first >= self.answer_after:
            self.ok = True


def params(**kw):
    p = dict(require_ready_line=False, timeout=30.0, hang_timeout=600.0, unhealthy_timeout=60.0, step=0,
             start_time=None, poll_interval=0.1)
    p.update(mod.TIMING)
    p.update(kw)
    return p


def wait_fake(up_for, answer_after, lines=(), **kw):
    clock = FakeClock()
    t_call = clock()
    res = mod.wait(None, params(**kw), RunningUnit(up_for), QuietLog(clock, lines), FakeProbe(clock, answer_after),
                   sglang_log.LogState(), clock=clock)
    return res, clock() - t_call


@pytest.mark.parametrize('up_for', [31, 45, 3600 * 24 * 3])
def test_running_server_answering_is_ready_however_long_it_has_been_up(up_for):
    # the reuse check (require_ready_line: false, timeout: 30) of a unit that has served for a while
    res, took = wait_fake(up_for, answer_after=0.5)
    assert res['status'] == 'ready' and res['reason'] is None
    assert 0.5 <= took < 1
    assert res['elapsed'] == pytest.approx(up_for + took, abs=1)


@pytest.mark.parametrize('up_for', [0, 45, 3600 * 24 * 3])
def test_running_server_never_answering_times_out_timeout_after_the_call(up_for):
    res, took = wait_fake(up_for, answer_after=None, timeout=30.0)
    assert res['status'] == 'timeout' and res['reason'] == 'timeout'
    assert 29.9 <= took < 30.5   # (the start is read from the real monotonic clock: microseconds off)
    assert res['seconds'] == pytest.approx(took, abs=0.01)


def test_start_up_is_still_bounded_from_the_server_start():
    # require_ready_line: true (a start-up): the 50 s bound counts from the start, 40 s before the call
    res, took = wait_fake(40, answer_after=0.5, require_ready_line=True, timeout=50.0)
    assert res['status'] == 'timeout'
    assert 9.9 <= took < 10.5   # (the start is read from the real monotonic clock: microseconds off)


@pytest.mark.parametrize('ready_ago', [5, 61, 106, 3600 * 24 * 3])
def test_running_server_with_an_old_ready_line_is_ready(ready_ago):
    # the journal of the serving unit (read from its start) holds the ready line, logged ready_ago s before the call:
    # the unhealthy bound (60 s) counts from the call too (the suite saw 'unhealthy' after 9 ms, 106 s after the start)
    res, took = wait_fake(ready_ago + 20, answer_after=0.5, lines=[(READY, ready_ago)])
    assert res['status'] == 'ready' and res['reason'] is None
    assert 0.5 <= took < 1


def test_running_server_with_an_old_ready_line_never_answering_times_out_after_the_call():
    res, took = wait_fake(126, answer_after=None, lines=[(READY, 106)], timeout=30.0, unhealthy_timeout=60.0)
    assert res['status'] == 'timeout'
    assert 29.9 <= took < 30.5


class ScriptedLog(object):
    """A log that gives each (after, text) line once the fake clock is ``after`` seconds past the call; each poll
    lets the clock run by the poll interval."""

    def __init__(self, clock, script):
        self.clock = clock
        self.script = [(clock.t + after, text) for after, text in script]

    def poll(self, interval):
        self.clock.t += interval
        due = [(text, t) for t, text in self.script if t <= self.clock.t]
        self.script = [(t, text) for t, text in self.script if t > self.clock.t]
        return due


TRACEBACK = [
    (0.10, '[2026-11-29 21:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):'),
    (0.11, '  File "/x/sglang/srt/managers/scheduler.py", line 2801, in run_scheduler_process'),
    # journald on a loaded host pauses here, longer than fatal_quiet
    (0.60, '  File "/x/flashinfer/fused_moe/core.py", line 2351, in trtllm_fp4_block_scale_moe'),
    (0.61, 'RuntimeError: trtllm_fp4_block_scale_moe requires 10.x architecture'),
]


def test_a_traceback_that_pauses_midway_is_read_to_its_end():
    clock = FakeClock()
    state = sglang_log.LogState()
    res = mod.wait(None, params(require_ready_line=True, poll_interval=0.05), RunningUnit(5),
                   ScriptedLog(clock, TRACEBACK), FakeProbe(clock, None), state, clock=clock)
    assert res['status'] == 'crashed'
    # the verdict waited for the kernel's line instead of taking the traceback's first lines
    assert 'requires 10.x architecture' in state.last_exception
    assert 'trtllm_fp4_block_scale_moe' in state.telling_line()
    assert res['seconds'] >= 0.6


def test_a_complete_traceback_is_decided_after_fatal_quiet():
    clock = FakeClock()
    script = [(0.1, TRACEBACK[0][1]), (0.11, TRACEBACK[1][1]), (0.12, TRACEBACK[2][1]), (0.13, TRACEBACK[3][1])]
    res = mod.wait(None, params(require_ready_line=True, poll_interval=0.05), RunningUnit(5),
                   ScriptedLog(clock, script), FakeProbe(clock, None), sglang_log.LogState(), clock=clock)
    assert res['status'] == 'crashed'
    assert res['seconds'] < 0.5


# --------------------------------------------------------------------------- probe: one request once ready
class JsonResp(Resp):
    def __init__(self, body):
        self.body = body

    def read(self):
        return self.body


def probe_open(answer):
    """open_url stand-in: the health endpoint answers 200; the probe request gets ``answer(url, data)``."""
    calls = []

    def opener(url, data=None, **kw):
        calls.append((url, data, kw))
        if data is None:
            return Resp()
        return answer(url, data)
    opener.calls = calls
    return opener


def test_probe_answered_means_ready(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    opener = probe_open(lambda url, data: JsonResp(b'{"text": " xq!zz", "meta_info": {}}'))
    mocker.patch(HU, side_effect=opener)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'port': 31000, 'api_key': 'k3y',
                           'probe': {'max_tokens': 4}})
    assert res['status'] == 'ready'
    assert res['probe']['ok'] is True and res['probe']['text'] == ' xq!zz'   # random text passes: not judged
    posts = [c for c in opener.calls if c[1] is not None]
    assert len(posts) == 1
    url, data, kw = posts[0]
    assert url == 'http://127.0.0.1:31000/generate'
    body = json.loads(data)
    assert body['sampling_params'] == {'temperature': 0, 'max_new_tokens': 4}
    assert body['text'] == 'The capital city of France is'
    assert kw['headers']['Authorization'] == 'Bearer k3y'


def test_without_probe_no_request_is_sent(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    opener = probe_open(lambda url, data: JsonResp(b'{"text": "x"}'))
    mocker.patch(HU, side_effect=opener)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid()})
    assert res['status'] == 'ready' and res['probe'] is None
    assert all(c[1] is None for c in opener.calls)


def test_probe_failing_on_a_live_server_is_unhealthy(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')

    def answer(url, data):
        raise HTTPError(url, 500, 'Internal Server Error', {}, io.BytesIO(b'{"error": "boom"}'))
    mocker.patch(HU, side_effect=probe_open(answer))
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'probe': {}})
    assert res['status'] == 'unhealthy' and res['reason'] == 'unhealthy'
    assert res['probe']['ok'] is False and res['probe']['reason'] == 'http_error'
    assert res['evidence'][0].startswith('ready, but the probe request POST /generate failed: HTTP 500')


def test_probe_that_kills_the_server_is_classified_by_the_same_call(tmp_path, run_module, mocker):
    """The request crashes the scheduler: the traceback lands in the log, the request fails; the verdict is
    the crash with its telling line, not a plain HTTP error."""
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')

    def answer(url, data):
        with open(str(log), 'a') as f:
            f.write(CRASH)
        raise URLError(ConnectionResetError(104, 'Connection reset by peer'))
    mocker.patch(HU, side_effect=probe_open(answer))
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'probe': {}})
    assert res['status'] == 'crashed' and res['reason'] == 'crashed'
    assert 'requires 10.x architecture' in res['evidence'][0]
    assert res['probe']['ok'] is False


def test_probe_is_not_sent_in_check_mode(tmp_path, run_module, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    opener = probe_open(lambda url, data: JsonResp(b'{"text": "x"}'))
    mocker.patch(HU, side_effect=opener)
    res = run_module(mod, {'log_path': str(log), 'pid': os.getpid(), 'probe': {}, '_ansible_check_mode': True})
    assert res['probe'] is None
    assert all(c[1] is None for c in opener.calls)


def test_probe_bounds_are_checked(tmp_path, run_module):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    res = run_module(mod, {'log_path': str(log), 'probe': {'timeout': 0}})
    assert res['failed'] and 'probe: timeout and max_tokens must be greater than 0' in res['msg']
