# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.llmserve.sglang.plugins.module_utils import _proctree
from ansible_collections.llmserve.sglang.plugins.module_utils import _readiness
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.tests.unit.plugins.module_utils.test__proctree import write_proc

HERE = os.path.dirname(__file__)
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', '_readiness.yml'), encoding='utf-8'))
HU = 'ansible_collections.llmserve.sglang.plugins.module_utils.sglang_http.open_url'
READY = CASES['texts']['ready']
CRASH = CASES['texts']['crash']
DEAD_PID = 2 ** 22 + 12345


def ids(cases):
    return [c['name'] for c in cases]


# --------------------------------------------------------------------------- run(module) on a stand-in module
class Exited(Exception):
    def __init__(self, result):
        super(Exited, self).__init__(result)
        self.result = result


class FakeModule(object):
    """What run() uses of an AnsibleModule: params, check_mode, get_bin_path, run_command, exit_json/fail_json."""

    def __init__(self, args, check_mode=False, run_command=None):
        self.params = dict(CASES['params'], **args)
        if self.params['probe'] is not None:
            self.params['probe'] = dict(CASES['probe_params'], **self.params['probe'])
        self.check_mode = check_mode
        self.commands = []
        self._run_command = run_command or (lambda argv: (0, '', ''))

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def run_command(self, argv, **kwargs):
        self.commands.append(list(argv))
        return self._run_command(list(argv))

    def warn(self, msg):
        pass

    def exit_json(self, **kwargs):
        raise Exited(kwargs)

    def fail_json(self, **kwargs):
        raise Exited(dict(kwargs, failed=True))


def run(args, check_mode=False, run_command=None):
    """run(module) with args; the result it exits with, and the module."""
    module = FakeModule(args, check_mode=check_mode, run_command=run_command)
    with pytest.raises(Exited) as exc:
        _readiness.run(module)
    return exc.value.result, module


class Resp(object):
    status = 200
    headers = {}

    def __init__(self, body=b''):
        self.body = body

    def read(self):
        return self.body

    def getcode(self):
        return 200


def server(health, post=None):
    """open_url stand-in: the health endpoint answers as ``health`` says; a probe request (a POST) as ``post``."""
    calls = []

    def opener(url, data=None, **kw):
        calls.append((url, data, kw))
        if data is not None:
            if callable(post):
                return post(url, data)
            if 'http_error' in post:
                raise HTTPError(url, post['http_error'], 'Error', {}, io.BytesIO(b'{"error": "boom"}'))
            return Resp(post['json'].encode('utf-8'))
        if health == 'unhealthy':
            raise HTTPError(url, 503, 'Service Unavailable', {}, io.BytesIO(b''))
        if health == 'refused':
            raise URLError(ConnectionRefusedError(111, 'Connection refused'))
        return Resp()
    opener.calls = calls
    return opener


def write(path, text, age=0):
    with open(path, 'w') as f:
        f.write(text)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))


def journal(case):
    """run_command stand-in for a unit: systemctl show prints the case's show; journalctl gives its entries, once."""
    out = ''.join(json.dumps(e) + '\n' for e in case['journal'])

    def run_command(argv):
        if argv[0].endswith('systemctl'):
            return 0, case['show'], ''
        return 0, '' if '--after-cursor' in argv else out, ''
    return run_command


def case_args(case, tmp_path):
    """The case's module args, and the child process it started (or None)."""
    args = dict(case.get('args') or {})
    child = None
    if 'show' not in case:
        args['log_path'] = str(tmp_path / 'sglang.log')
        if 'log' in case:
            write(args['log_path'], case['log'], case.get('log_age', 0))
        how = case.get('pid', 'self')
        if how == 'child':
            child = subprocess.Popen([sys.executable, '-c', case['child']])
        args['pid'] = {'self': os.getpid(), 'dead': DEAD_PID, 'none': None, 'child': child and child.pid}[how]
    if 'start_time_ago' in case:
        args['start_time'] = time.time() - case['start_time_ago']
    elif args.get('pid') == os.getpid():
        # this test process stands for a server that starts now: its own start (minutes ago, in a long test run)
        # would count against the case's timeout
        args['start_time'] = time.time()
    return args, child


def lookup(res, dotted):
    for key in dotted.split('.'):
        res = res[key]
    return res


@pytest.mark.parametrize('case', CASES['runs'], ids=ids(CASES['runs']))
def test_run(case, tmp_path, mocker):
    opener = mocker.patch(HU, side_effect=server(case.get('health'), case.get('post'))).side_effect
    args, child = case_args(case, tmp_path)
    t0 = time.time()
    try:
        res, module = run(args, check_mode=case.get('check_mode', False),
                          run_command=journal(case) if 'show' in case else None)
    finally:
        if child is not None:
            child.kill()      # our own child, by its handle
            child.wait()
    # far below the cases' timeouts: a call that waited them out instead of stopping on what it saw fails here
    assert time.time() - t0 < 120
    for key, value in (case.get('expect') or {}).items():
        assert lookup(res, key) == value, (key, res)
    check_evidence(case, res)
    if 'health_call' in case:
        url, kw = opener.calls[0][0], opener.calls[0][2]
        assert [url, kw['headers']['Authorization']] == case['health_call']
    if 'posts' in case:
        assert len([c for c in opener.calls if c[1] is not None]) == case['posts']
    if 'absent' in case:
        assert case['absent'] not in json.dumps(res)
    if 'journal_match' in case:
        assert case['journal_match'] in [c for c in module.commands if c[0].endswith('journalctl')][0]
    if 'systemctl_argv' in case:
        want = case['systemctl_argv']
        assert module.commands[0][:len(want) - 1] == want[:-1] and module.commands[0][-1] == want[-1]


def check_evidence(case, res):
    if 'status_in' in case:
        assert res['status'] in case['status_in']
    if 'msg_has' in case:
        assert case['msg_has'] in res['msg']
    if 'evidence0' in case:
        assert case['evidence0'] in res['evidence'][0]
    if 'evidence0_starts' in case:
        assert res['evidence'][0].startswith(case['evidence0_starts'])
    for text in case.get('evidence_has', []):
        assert any(text in e for e in res['evidence']), text
    if 'tail_last_starts' in case:
        assert res['log_tail'][-1].startswith(case['tail_last_starts'])


def test_step_returns_loading_then_continues(tmp_path, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), 'Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]\n')
    mocker.patch(HU, side_effect=server('refused'))
    args = {'log_path': str(log), 'pid': os.getpid(), 'step': 0.3, 'timeout': 300.0, 'start_time': time.time() - 42}
    res, dummy = run(args)
    # C(loading), not C(timeout): the call ended on its step (no wall-clock bound: a loaded machine stretches it)
    assert res['status'] == 'loading' and res['reason'] is None
    assert res['milestone'] == 'loading_shards' and res['milestone_detail'] == '50% (1/2)'
    # elapsed counts from start_time, seconds from the call, which began after start_time + 42
    assert res['seconds'] >= 0.3 and res['elapsed'] >= 42 + res['seconds'] - 0.01
    with open(str(log), 'a') as f:
        f.write(READY + '\n')
    mocker.patch(HU, side_effect=server('ok'))
    args['cursor'] = res['cursor']
    res2, dummy = run(args)
    assert res2['status'] == 'ready'
    assert int(res2['cursor'].split(':')[1]) > int(res['cursor'].split(':')[1])


def test_probe_answered_means_ready(tmp_path, mocker):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    opener = server('ok', {'json': '{"text": " xq!zz", "meta_info": {}}'})
    mocker.patch(HU, side_effect=opener)
    res, dummy = run({'log_path': str(log), 'pid': os.getpid(), 'port': 31000, 'api_key': 'k3y',
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


def test_probe_that_kills_the_server_is_classified_by_the_same_call(tmp_path, mocker):
    """The request crashes the scheduler: the traceback lands in the log, the request fails; the verdict is
    the crash with its telling line, not a plain HTTP error."""
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')

    def answer(url, data):
        with open(str(log), 'a') as f:
            f.write(CRASH)
        raise URLError(ConnectionResetError(104, 'Connection reset by peer'))
    mocker.patch(HU, side_effect=server('ok', answer))
    res, dummy = run({'log_path': str(log), 'pid': os.getpid(), 'probe': {}})
    assert res['status'] == 'crashed' and res['reason'] == 'crashed'
    assert 'contains no kernels runnable on sm120' in res['evidence'][0]
    assert res['probe']['ok'] is False


def spec_default(option):
    """An option's default as AnsibleModule hands it to run(module) (a float option's int default as a float)."""
    default = option.get('default')
    return float(default) if option['type'] == 'float' and default is not None else default


def test_params_are_the_spec_defaults():
    """The cases' params are what the module's argument spec (sanity's validate-modules holds it to the module's
    documentation) gives run(module) when no option is set."""
    spec = _readiness.argument_spec()
    params = CASES['params']
    assert sorted(params) == sorted(spec)
    for name, option in spec.items():
        assert params[name] == spec_default(option), name
        assert type(params[name]) is type(spec_default(option)), name
    assert sorted(CASES['probe_params']) == sorted(spec['probe']['options'])
    for name, option in spec['probe']['options'].items():
        assert CASES['probe_params'][name] == spec_default(option), name


# --------------------------------------------------------------------------- the watchers
@pytest.mark.parametrize('case', CASES['signal_name'], ids=[str(c['num']) for c in CASES['signal_name']])
def test_signal_name(case):
    assert _readiness.signal_name(case['num']) == case['name']


def test_proc_state_of_this_process_and_of_none():
    assert _readiness.proc_state(os.getpid()) == (True, None)
    assert _readiness.proc_state(DEAD_PID) == (False, None)
    assert _readiness.proc_state(0) == (False, None)


@pytest.mark.parametrize('case', CASES['unit_dead'], ids=ids(CASES['unit_dead']))
def test_unit_dead(case):
    class M(object):
        def run_command(self, argv):
            return 0, self.out, ''

        def fail_json(self, **kw):
            raise AssertionError(kw)
    m = M()
    m.out = 'ActiveState=active\nMainPID=1\nInvocationID=a\n'
    w = _readiness.UnitWatch(m, 'u.service', 'systemctl')
    m.out = case['props']
    w.last_show = 0
    assert w.dead(time.time()) is case['dead']


# --------------------------------------------------------------------------- the wait, on a fake clock
class FakeClock(object):
    def __init__(self, t=1000000.0):
        self.t = t

    def __call__(self):
        return self.t


class ScriptedLog(object):
    """A log that gives each (after, text) line, time-stamped call + after, once the fake clock is ``after`` seconds
    past the call (a negative ``after``: a line logged before the call); each poll lets the clock run by the poll
    interval."""

    def __init__(self, clock, script):
        self.clock = clock
        # [after, text] or [after, text, delivered]: a line read only once the clock is `delivered` seconds past the
        # call (the journal's backlog coming after the first read)
        self.script = [(clock.t + e[0], e[1], clock.t + (e[2] if len(e) > 2 else e[0])) for e in script]

    def poll(self, interval):
        self.clock.t += interval
        due = [(text, t) for t, text, at in self.script if at <= self.clock.t]
        self.script = [(t, text, at) for t, text, at in self.script if at > self.clock.t]
        return due


class RunningUnit(object):
    """A unit whose main process started ``up_for`` seconds before the call and stays alive."""
    pid = 4242

    def __init__(self, up_for):
        self.up_for = up_for

    def started_monotonic(self):
        # read when the wait asks, so however slowly the test runs the unit is up_for seconds old at the call
        return time.monotonic() - self.up_for

    def dead(self, now):
        return False


class FakeProbe(object):
    """/health_generate: answers 200 ``answer_after`` fake seconds after the first probe (None: never)."""

    def __init__(self, answer_after):
        self.answer_after = answer_after
        self.first = None
        self.ok = False
        self.last = None

    def kick(self, now):
        if self.first is None:
            self.first = now
        if self.answer_after is not None and now - self.first >= self.answer_after:
            self.ok = True

    def busy(self):
        """Sent and not answered yet (a probe that never answers is sent again and again: busy too)."""
        return self.first is not None and not self.ok


def wait_params(**kw):
    p = dict(require_ready_line=False, timeout=30.0, hang_timeout=600.0, unhealthy_timeout=60.0, step=0,
             start_time=None, poll_interval=0.1)
    p.update(_readiness.TIMING)
    p.update(kw)
    return p


@pytest.mark.parametrize('case', CASES['running'], ids=ids(CASES['running']))
def test_running(case):
    clock = FakeClock()
    t_call = clock()
    script = [(-ago, text) for text, ago in case.get('lines', [])]
    res = _readiness.wait(wait_params(**case.get('params', {})), RunningUnit(case['up_for']),
                          ScriptedLog(clock, script), FakeProbe(case['answer_after']), sglang_log.LogState(),
                          clock=clock)
    took = clock() - t_call
    assert res['status'] == case['status']
    assert res['reason'] == (None if case['status'] == 'ready' else case['status'])
    assert case['took'][0] <= took < case['took'][1]
    # (the unit's start is read from the real monotonic clock: microseconds off)
    assert res['elapsed'] == pytest.approx(case['up_for'] + took, abs=1)
    assert res['seconds'] == pytest.approx(took, abs=0.01)


@pytest.mark.parametrize('case', CASES['traceback'], ids=ids(CASES['traceback']))
def test_traceback(case):
    clock = FakeClock()
    state = sglang_log.LogState()
    res = _readiness.wait(wait_params(require_ready_line=True, poll_interval=0.05), RunningUnit(5),
                          ScriptedLog(clock, case['script']), FakeProbe(None), state, clock=clock)
    assert res['status'] == case['status']
    assert case['seconds'][0] <= res['seconds'] < case['seconds'][1]
    assert case['last_exception'] in state.last_exception
    assert case['telling'] in state.telling_line()


@pytest.mark.parametrize('case', CASES['milestone_steps'], ids=ids(CASES['milestone_steps']))
def test_milestone_steps(case):
    clock = FakeClock()
    state = sglang_log.LogState()
    params = dict(case['params'])
    probe = FakeProbe(params.pop('answer_after', None))
    res = _readiness.wait(wait_params(require_ready_line=True, step=params.pop('step', 60.0), timeout=1000.0, **params),
                          RunningUnit(5), ScriptedLog(clock, case['script']), probe, state, clock=clock)
    assert res['status'] == case.get('status', 'loading')
    assert case['seconds'][0] <= res['seconds'] < case['seconds'][1]
    assert state.milestone == case['milestone']


# --------------------------------------------------------------------------- a rank's death, seen in /proc
RANK_TREE = {
    100: {'comm': 'python', 'ppid': 1, 'start': 100},
    101: {'comm': 'sglang::schedul', 'title': 'sglang::scheduler_TP0', 'ppid': 100},
    102: {'comm': 'sglang::schedul', 'title': 'sglang::scheduler_TP1', 'ppid': 100},
    103: {'comm': 'sglang::detoken', 'title': 'sglang::detokenizer', 'ppid': 100},
    110: {'comm': 'python', 'ppid': 101},
}


class ScriptedTree(_proctree.RankWatch):
    """The real RankWatch on a fake /proc that changes as the case's ``tree`` says, on the fake clock."""

    def __init__(self, root, t0, script):
        super(ScriptedTree, self).__init__(root=root, croot=root)
        self.t0 = t0
        self.script = [list(change) for change in script]
        for pid, spec in RANK_TREE.items():
            write_proc(root, pid, spec)

    def poll(self, now, main_pid, control_group=None):
        for after, pid, spec in [c for c in self.script if c[0] <= now - self.t0 + 1e-9]:
            if spec is None:
                shutil.rmtree(os.path.join(self.root, str(pid)))
            else:
                write_proc(self.root, pid, spec)
        self.script = [c for c in self.script if c[0] > now - self.t0 + 1e-9]
        return super(ScriptedTree, self).poll(now, main_pid, control_group)


class TreePid(object):
    """The main process, PID 100: alive until main_dies_at (fake seconds after the call), then ended by SIGKILL."""
    pid = 100

    def __init__(self, clock, case):
        self.clock, self.t0 = clock, clock()
        self.dies_at = case.get('main_dies_at')

    def started_monotonic(self):
        # 5 s before the call on the fake clock, read when the wait asks: a slow test run moves no deadline
        return time.monotonic() - 5 - (self.clock() - self.t0)

    def after(self, at):
        return at is not None and self.clock() - self.t0 >= at - 1e-9

    def dead(self, now):
        return self.after(self.dies_at)

    def exit_info(self):
        return (9 if self.after(self.dies_at) else None), None, None


class TreeUnit(TreePid):
    """... of a unit: systemd says it stops from stops_at; its Result is result."""
    props = {}

    def __init__(self, clock, case):
        super(TreeUnit, self).__init__(clock, case)
        self.stops_at = case.get('stops_at')
        self.result = case.get('result')

    def ended(self):
        return self.after(self.stops_at) or self.after(self.dies_at)

    def refresh(self):
        return self.props

    def exit_info(self):
        return super(TreeUnit, self).exit_info()[:2] + (self.result,)


def matches(want, got):
    if isinstance(want, dict) and list(want) == ['re']:
        return re.search(want['re'], got) is not None
    return want == got


@pytest.mark.parametrize('case', CASES['rank_deaths'], ids=ids(CASES['rank_deaths']))
def test_rank_deaths(case, tmp_path):
    clock = FakeClock()
    watch = (TreePid if case.get('no_unit') else TreeUnit)(clock, case)
    tree = ScriptedTree(str(tmp_path), clock(), case.get('tree', []))
    state = sglang_log.LogState()
    p = wait_params(require_ready_line=True, **case.get('params', {}))
    probe = FakeProbe(None)
    res = _readiness.wait(p, watch, ScriptedLog(clock, case.get('script', [])), probe, state,
                          check_mode=case.get('check_mode', False), clock=clock, tree=tree)
    assert res['status'] == case['status'], res
    assert case['seconds'][0] <= res['seconds'] < case['seconds'][1], res
    out = _readiness.result(dict(p, cursor=None, tail_lines=40), res, state, watch, None, probe, None)
    assert len(out['evidence']) == len(case['evidence']), out['evidence']
    assert all(matches(w, g) for w, g in zip(case['evidence'], out['evidence'])), out['evidence']
    if case['child_exit'] is None:
        assert out['child_exit'] is None, out['child_exit']
    else:
        assert dict((k, out['child_exit'].get(k)) for k in case['child_exit']) == case['child_exit'], out['child_exit']
    assert out['signal'] == res['signal']
    if 'checks' in case:
        assert case['checks'][0] <= tree.checks <= case['checks'][1], tree.checks


class Shows(object):
    """What UnitWatch uses of a module: systemctl show prints ``out``."""

    def __init__(self, out):
        self.out = out

    def run_command(self, argv):
        return 0, self.out, ''

    def fail_json(self, **kw):
        raise AssertionError(kw)


def test_make_tree_only_with_a_process():
    p = dict(_readiness.TIMING)
    assert _readiness.make_tree(p, _readiness.NoWatch()) is None
    tree = _readiness.make_tree(p, _readiness.PidWatch(os.getpid()))
    assert (tree.every, tree.scan_every) == (p['tree_every'], p['tree_scan'])
    # a unit whose main process is not there yet: its ranks are watched once it is
    starting = _readiness.UnitWatch(Shows('ActiveState=activating\nMainPID=0\n'), 'u.service', 'systemctl')
    assert starting.pid == 0 and _readiness.make_tree(p, starting) is not None
