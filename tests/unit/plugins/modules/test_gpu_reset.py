# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reset with nvidia-smi and fuser mocked, against real processes this test starts (and only those)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
import sys
import time

import pytest

from ansible_collections.llmserve.sglang.plugins.modules import gpu_reset
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import run_mocked

UUID = 'GPU-a4fbce9b-25f7-f038-11e1-b07ee93c4d63'
IGNORE_TERM = ('import signal, sys, time\n'
               'signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
               'sys.stdout.write("ready\\n"); sys.stdout.flush()\n'
               'time.sleep(60)\n')


@pytest.fixture
def holder():
    procs = []

    def start(ignore_term=False):
        code = IGNORE_TERM if ignore_term else 'import sys, time; sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(60)'
        proc = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b'ready'
        procs.append(proc)
        return proc
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


class FakeGpu(object):
    """nvidia-smi and fuser answers: memory held while any listed pid is alive."""

    def __init__(self, pids, mib=21256):
        self.pids = pids
        self.mib = mib
        self.queries = 0

    def alive(self):
        return [pid for pid in self.pids if gpu_holders.ProcOps().alive(pid)]

    def __call__(self, argv):
        if argv[0].endswith('nvidia-smi'):
            if argv[1].startswith('--query-gpu='):
                self.queries += 1
                used = self.mib * len(self.alive()) + 3
                return 0, '0, %s, %d, 143771\n' % (UUID, used), ''
            if argv[1].startswith('--query-compute-apps='):
                rows = ''.join('%d, python3, %d, %s, 00000000:00:06.0\n' % (pid, self.mib, UUID) for pid in self.alive())
                return 0, rows, ''
            if argv[1] == '--gpu-reset':
                self.pids = []
                return 0, 'GPU 00000000:00:06.0 was successfully reset.\n', ''
        if argv[0].endswith('fuser'):
            alive = self.alive()
            if not alive:
                return 1, '', ''
            # as fuser really writes it: PIDs on stdout, the table (without PIDs) on stderr
            out = ''.join('%6d' % pid for pid in alive)
            err = 'Cannot stat file /proc/1/fd/3: Permission denied\n                     USER        PID ACCESS COMMAND\n'
            err += ''.join('/dev/nvidia0:        root      F...m python3\n' for pid in alive)
            return 0, out, err
        raise AssertionError('unexpected %r' % argv)


def run(args, monkeypatch, gpu):
    args = dict(args)
    args.setdefault('devices', '/dev/null*')  # glob must match something here; fuser is mocked
    return run_mocked(gpu_reset.main, args, monkeypatch, gpu)


def test_sigterm_frees_the_gpu(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    start = time.time()
    result, failed, calls = run({'term_grace': 5, 'timeout': 10}, monkeypatch, gpu)
    assert not failed, result['msg'] if failed else ''
    assert time.time() - start < 2
    assert result['changed']
    assert [(k['pid'], k['signal']) for k in result['killed']] == [(proc.pid, 'SIGTERM')]
    assert result['memory_before'][0]['used_mib'] > 20000 and result['memory_after'][0]['used_mib'] < 1024
    assert result['seconds_to_free'] is not None and result['seconds_to_free'] < 2
    holder_rec = [h for h in result['holders'] if h['pid'] == proc.pid][0]
    assert holder_rec['sources'] == ['nvidia-smi', 'fuser'] and holder_rec['gpus'] == [0]


def test_sigkill_after_grace(holder, monkeypatch):
    proc = holder(ignore_term=True)
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run({'term_grace': 0.3, 'timeout': 10}, monkeypatch, gpu)
    assert not failed
    assert [(k['pid'], k['signal']) for k in result['killed']] == [(proc.pid, 'SIGKILL')]
    assert 0.3 <= result['killed'][0]['seconds'] < 1.5


def test_check_mode_kills_nothing(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run({'_ansible_check_mode': True}, monkeypatch, gpu)
    assert not failed and result['changed'] and result['killed'] == []
    assert [r['pid'] for r in result['would_kill']] == [proc.pid]
    time.sleep(0.1)
    assert proc.poll() is None


def test_protected_holder_makes_a_bounded_failure(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    start = time.time()
    result, failed, calls = run({'protected_pids': [proc.pid], 'timeout': 0.5}, monkeypatch, gpu)
    elapsed = time.time() - start
    assert failed and elapsed < 2
    assert 'GPU memory still held' in result['msg'] and 'GPU 0' in result['msg']
    assert 'pid %d' % proc.pid in result['msg'] and 'protected_pids' in result['msg']
    assert proc.poll() is None
    assert gpu.queries >= 3  # polled, not one fixed sleep


def test_hard_reset_only_when_asked(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run({'protected_pids': [proc.pid], 'timeout': 0.3, 'hard_reset': True}, monkeypatch, gpu)
    assert not failed and result['hard_reset_done'] == [0]
    assert ['/usr/bin/nvidia-smi', '--gpu-reset', '-i', '0'] in calls
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run({'protected_pids': [proc.pid], 'timeout': 0.3}, monkeypatch, gpu)
    assert failed and not [c for c in calls if '--gpu-reset' in c]


def test_other_container_is_spared(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run({'vmid': 129, '_ansible_check_mode': True}, monkeypatch, gpu)
    assert not failed and result['would_kill'] == []
    assert 'not to container 129' in result['spared'][0]['why']


def test_missing_nvidia_smi(monkeypatch):
    result, failed, calls = run_mocked(gpu_reset.main, {}, monkeypatch, FakeGpu([]), bin_paths={'nvidia-smi': None})
    assert failed and result['msg'].startswith('nvidia_smi: ')


def test_without_fuser_scans_proc(holder, monkeypatch):
    proc = holder()
    gpu = FakeGpu([proc.pid])
    result, failed, calls = run_mocked(gpu_reset.main, {'devices': '/dev/null*', '_ansible_check_mode': True},
                                       monkeypatch, gpu, bin_paths={'fuser': None})
    assert not failed and result['sources_used'] == ['nvidia-smi', 'proc']


class FakeSystemd(object):
    """systemctl (optionally through pct exec) in front of FakeGpu: the unit's process ends when it is stopped."""

    def __init__(self, gpu, unit_proc, load='loaded', active='active', stop_rc=0):
        self.gpu, self.proc, self.load, self.active, self.stop_rc = gpu, unit_proc, load, active, stop_rc

    def __call__(self, argv):
        if argv[:2] == ['pct', 'exec']:
            argv = argv[4:]
        if argv[0] == 'systemctl' and argv[1] == 'show':
            return 0, 'LoadState=%s\nActiveState=%s\n' % (self.load, self.active), ''
        if argv[0] == 'timeout' and argv[2:4] == ['systemctl', 'stop']:
            if self.stop_rc == 0 and self.proc is not None:
                self.proc.terminate()
                self.proc.wait()
            return self.stop_rc, '', ''
        if argv[:2] == ['systemctl', 'kill']:
            self.proc.kill()
            self.proc.wait()
            return 0, '', ''
        return self.gpu(argv)


def test_stop_unit_first_then_nothing_left_to_kill(holder, monkeypatch):
    proc = holder()
    fake = FakeSystemd(FakeGpu([proc.pid]), proc)
    result, failed, calls = run({'stop_unit': 'sglang.service', 'stop_timeout': 7}, monkeypatch, fake)
    assert not failed, result.get('msg')
    assert result['changed'] and result['killed'] == []
    assert result['unit_stop']['result'] == 'stopped' and result['unit_stop']['before'] == 'active'
    assert ['timeout', '7', 'systemctl', 'stop', 'sglang.service'] in calls
    assert calls.index(['timeout', '7', 'systemctl', 'stop', 'sglang.service']) < min(
        i for i, c in enumerate(calls) if c[0].endswith('nvidia-smi'))


def test_stop_unit_timed_out_is_killed(holder, monkeypatch):
    proc = holder(ignore_term=True)
    fake = FakeSystemd(FakeGpu([proc.pid]), proc, stop_rc=124)
    result, failed, calls = run({'stop_unit': 'sglang.service', 'stop_timeout': 1}, monkeypatch, fake)
    assert not failed and result['unit_stop']['result'] == 'killed'
    assert ['systemctl', 'kill', '--signal=SIGKILL', 'sglang.service'] in calls
    assert proc.poll() is not None


def test_stop_unit_not_loaded_or_in_a_container(holder, monkeypatch):
    fake = FakeSystemd(FakeGpu([]), None, load='not-found', active='inactive')
    result, failed, calls = run({'stop_unit': 'sglang.service'}, monkeypatch, fake)
    assert not failed and not result['changed'] and result['unit_stop']['result'] == 'not_loaded'
    assert not [c for c in calls if 'stop' in c]
    fake = FakeSystemd(FakeGpu([]), None, active='active')
    result, failed, calls = run({'stop_unit': 'sglang.service', 'vmid': 129, '_ansible_check_mode': True},
                                monkeypatch, fake)
    assert not failed and result['changed'] and result['unit_stop']['result'] == 'would_stop'
    assert calls[0] == ['pct', 'exec', '129', '--', 'systemctl', 'show', '--property=LoadState,ActiveState',
                        'sglang.service']
    assert not [c for c in calls if 'stop' in c]


def test_stop_unit_failure_is_named(monkeypatch):
    def broken(argv):
        return 1, '', 'Failed to connect to bus'
    result, failed, calls = run({'stop_unit': 'sglang.service'}, monkeypatch, broken)
    assert failed and result['msg'].startswith('stop_unit: systemctl show') and 'bus' in result['msg']


@pytest.mark.parametrize('bad', [{'timeout': 0}, {'stop_timeout': 0}, {'term_grace': -1}])
def test_unbounded_wait_is_refused_before_anything_runs(bad, monkeypatch):
    result, failed, calls = run(bad, monkeypatch, FakeGpu([]))
    assert failed and 'every wait is bounded' in result['msg'] and calls == []


UUIDS = ['GPU-00000000-0000-0000-0000-00000000000a', 'GPU-00000000-0000-0000-0000-00000000000b']


class TwoGpus(object):
    """Two GPUs; ``held``: {pid: [gpu indices]}; a GPU's memory is held while a pid that holds it is alive."""

    def __init__(self, held, mib=20000):
        self.held = held
        self.mib = mib

    def alive(self):
        return [pid for pid in self.held if gpu_holders.ProcOps().alive(pid)]

    def __call__(self, argv):
        alive = self.alive()
        if argv[0].endswith('nvidia-smi') and argv[1].startswith('--query-gpu='):
            rows = ''
            for index, uuid in enumerate(UUIDS):
                used = 3 + self.mib * len([pid for pid in alive if index in self.held[pid]])
                rows += '%d, %s, %d, 143771\n' % (index, uuid, used)
            return 0, rows, ''
        if argv[0].endswith('nvidia-smi') and argv[1].startswith('--query-compute-apps='):
            return 0, ''.join('%d, python3, %d, %s, 00000000:00:0%d.0\n' % (pid, self.mib, UUIDS[i], 6 + i)
                              for pid in alive for i in self.held[pid]), ''
        if argv[0].endswith('fuser'):
            return 1, '', ''
        raise AssertionError('unexpected %r' % argv)


def test_subset_ends_only_holders_of_its_gpus(holder, monkeypatch):
    mine, other = holder(), holder()
    gpu = TwoGpus({mine.pid: [0], other.pid: [1]})
    result, failed, calls = run({'gpus': ['0'], 'term_grace': 5, 'timeout': 10}, monkeypatch, gpu)
    assert not failed, result.get('msg')
    assert [k['pid'] for k in result['killed']] == [mine.pid]
    assert result['gpus'] == [0] and result['blocked'] == []
    spared = [s for s in result['spared'] if s['pid'] == other.pid]
    assert spared and 'outside' in spared[0]['why']
    time.sleep(0.1)
    assert other.poll() is None  # the other service's process lives, its GPU's memory is not awaited


def test_subset_by_uuid(holder, monkeypatch):
    mine, other = holder(), holder()
    gpu = TwoGpus({mine.pid: [0], other.pid: [1]})
    result, failed, calls = run({'gpus': [UUIDS[1]], 'term_grace': 5, 'timeout': 10}, monkeypatch, gpu)
    assert not failed, result.get('msg')
    assert [k['pid'] for k in result['killed']] == [other.pid] and result['gpus'] == [1]
    assert mine.poll() is None


def test_subset_holder_of_both_sides_blocks_before_any_signal(holder, monkeypatch):
    mine, both = holder(), holder()
    gpu = TwoGpus({mine.pid: [0], both.pid: [0, 1]})
    for check in (False, True):
        result, failed, calls = run({'gpus': ['0'], '_ansible_check_mode': check}, monkeypatch, gpu)
        assert failed
        assert 'pid %d' % both.pid in result['msg'] and 'GPU(s) 1 outside' in result['msg']
        assert [b['pid'] for b in result['blocked']] == [both.pid]
        assert result['killed'] == []
        time.sleep(0.1)
        assert mine.poll() is None and both.poll() is None


def test_subset_unknown_gpu_fails_before_any_signal(holder, monkeypatch):
    proc = holder()
    gpu = TwoGpus({proc.pid: [0]})
    result, failed, calls = run({'gpus': ['0', '5']}, monkeypatch, gpu)
    assert failed and 'gpus: this host has no GPU 5' in result['msg']
    assert proc.poll() is None
