# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders as gh

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'gpu_holders.yml')))


@pytest.mark.parametrize('case', CASES['fuser'], ids=[c['name'] for c in CASES['fuser']])
def test_parse_fuser(case):
    if 'text' in case:
        assert gh.parse_fuser(case['text']) == case['want']
    else:
        assert gh.parse_fuser(case['stdout'], case['stderr']) == case['want']


@pytest.mark.parametrize('case', CASES['cgroup'], ids=[repr(c['text']) for c in CASES['cgroup']])
def test_vmid_from_cgroup(case):
    assert gh.vmid_from_cgroup(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['unit_cgroup'], ids=[repr(c['text']) for c in CASES['unit_cgroup']])
def test_unit_from_cgroup(case):
    assert gh.unit_from_cgroup(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['nspid'], ids=[repr(c['text']) for c in CASES['nspid']])
def test_nspid(case):
    assert gh.nspid_from_status(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['stat'], ids=[c['text'][:12] for c in CASES['stat']])
def test_parse_stat(case):
    assert gh.parse_stat(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['plan'], ids=[c['name'] for c in CASES['plan']])
def test_plan(case):
    holders = []
    for rec in case['holders']:
        item = {'visible': True}
        item.update(rec)
        holders.append(item)
    kill, spared = gh.plan(holders, vmid=case.get('vmid'), own_vmid=case.get('own_vmid'),
                           protected_pids=case.get('protected_pids', []), protected_names=case.get('protected_names', []),
                           self_pids=case.get('self_pids', []), container=case.get('container', False),
                           default_protected=case.get('default_protected', True))
    assert [r['pid'] for r in kill] == case['kill']
    assert sorted(r['pid'] for r in spared) == sorted(case['spared'])
    for rec in spared:
        assert case['spared'][rec['pid']] in rec['why'], rec


def test_merge_holders():
    apps = [{'pid': 419, 'name': 'python3', 'used_mib': 21256, 'gpu_index': 0},
            {'pid': 419, 'name': 'python3', 'used_mib': 100, 'gpu_index': 1}]
    fuser = gh.parse_fuser('  419  500', '/dev/nvidia0:  root  F...m python3\n/dev/nvidiactl:  root  F.... other\n')
    infos = {419: {'pid': 419, 'name': 'python3', 'state': 'S', 'ppid': 1, 'starttime': 5, 'cmdline': 'python3 -m x',
                   'vmid': 129, 'nspid': [419, 12]}, 500: None}
    merged = gh.merge_holders(apps, fuser, {600: ['/dev/nvidia-uvm']}, infos)
    assert [h['pid'] for h in merged] == [419, 500, 600]
    first = merged[0]
    assert first['sources'] == ['nvidia-smi', 'fuser'] and first['used_mib'] == 21356 and first['gpus'] == [0, 1]
    assert first['devices'] == ['/dev/nvidia0'] and first['vmid'] == 129 and first['nspid'] == [419, 12]
    assert merged[1]['visible'] is False and merged[1]['name'] == 'other'
    assert merged[2]['sources'] == ['proc'] and merged[2]['visible'] is False
    only_smi = gh.merge_holders(apps, None, None, {})
    assert only_smi[0]['devices'] == ['/dev/nvidia0', '/dev/nvidia1']


def test_proc_readers_on_a_fake_tree(tmp_path):
    base = tmp_path / '4242'
    (base / 'fd').mkdir(parents=True)
    (base / 'stat').write_text('4242 (python3) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n')
    (base / 'cmdline').write_bytes(b'python3\x00-m\x00sglang.launch_server\x00')
    (base / 'cgroup').write_text('0::/lxc/129/ns/system.slice/sglang.service\n')
    (base / 'status').write_text('Name:\tpython3\nNSpid:\t4242\t88\n')
    os.symlink('/dev/nvidia0', str(base / 'fd' / '5'))
    os.symlink('/dev/null', str(base / 'fd' / '6'))
    os.symlink('/dev/nvidia-uvm', str(base / 'fd' / '7'))
    (tmp_path / 'self').mkdir()
    info = gh.proc_info(4242, proc=str(tmp_path))
    assert info == {'pid': 4242, 'name': 'python3', 'state': 'S', 'ppid': 1, 'starttime': 777,
                    'cmdline': 'python3 -m sglang.launch_server', 'vmid': 129, 'unit': 'sglang.service',
                    'nspid': [4242, 88]}
    assert gh.proc_info(1, proc=str(tmp_path)) is None
    assert gh.scan_proc_fds(proc=str(tmp_path), pattern=gh.device_pattern('/dev/nvidia*')) == {
        4242: ['/dev/nvidia-uvm', '/dev/nvidia0']}
    assert gh.scan_proc_fds(proc=str(tmp_path), pattern=gh.device_pattern('/dev/nvidia[0-9]*')) == {4242: ['/dev/nvidia0']}


def test_ancestors_of_this_process():
    chain = gh.ancestors(os.getpid())
    assert os.getpid() in chain and os.getppid() in chain


# ---- the loops with a fake clock and process table
class FakeOps(object):
    def __init__(self, procs):
        # procs: pid -> dict(dies_on=set of signals or 'never', state)
        self.procs = procs
        self.t = 0.0
        self.sent = []

    def alive(self, pid, starttime=None):
        return pid in self.procs and self.procs[pid].get('state') != 'Z'

    def state(self, pid):
        return self.procs[pid].get('state', 'S') if pid in self.procs else None

    def kill(self, pid, sig):
        self.sent.append((pid, sig))
        if pid in self.procs and sig in self.procs[pid]['dies_on']:
            self.procs[pid]['die_at'] = self.t + self.procs[pid].get('delay', 0.1)
        return pid in self.procs

    def sleep(self, seconds):
        self.t += seconds
        for pid in list(self.procs):
            if self.procs[pid].get('die_at') is not None and self.t >= self.procs[pid]['die_at']:
                del self.procs[pid]

    def now(self):
        return self.t


def test_terminate_term_then_kill():
    ops = FakeOps({10: {'dies_on': {signal.SIGTERM}}, 11: {'dies_on': {signal.SIGKILL}},
                   12: {'dies_on': set(), 'state': 'D'}})
    targets = [{'pid': 10, 'name': 'a'}, {'pid': 11, 'name': 'b'}, {'pid': 12, 'name': 'c'}, {'pid': 13, 'name': 'gone'}]
    killed, remaining = gh.terminate(targets, term_grace=1.0, deadline=3.0, ops=ops)
    assert [(k['pid'], k['signal']) for k in killed] == [(10, 'SIGTERM'), (11, 'SIGKILL')]
    assert killed[0]['seconds'] < 0.5 and 1.0 <= killed[1]['seconds'] < 1.5
    assert [r['pid'] for r in remaining] == [12] and 'D state' in remaining[0]['why']
    assert (13, signal.SIGTERM) not in ops.sent
    assert ops.t <= 3.1


def test_wait_memory_bounded():
    ops = FakeOps({})
    readings = iter([[{'index': 0, 'used_mib': 20000}], [{'index': 0, 'used_mib': 9000}], [{'index': 0, 'used_mib': 3}]])
    ok, memory, seconds = gh.wait_memory(lambda: next(readings), 1024, deadline=5, ops=ops)
    assert ok and memory == [{'index': 0, 'used_mib': 3}] and abs(seconds - 0.2) < 1e-6
    ops = FakeOps({})
    ok, memory, seconds = gh.wait_memory(lambda: [{'index': 0, 'used_mib': 20000}, {'index': 1, 'used_mib': 0}], 1024,
                                         deadline=1.0, ops=ops)
    assert not ok and ops.t <= 1.1
    ok, memory, seconds = gh.wait_memory(lambda: [{'index': 0, 'used_mib': 20000}, {'index': 1, 'used_mib': 0}], 1024,
                                         deadline=1.0, ops=ops, gpus=[1])
    assert ok


def test_terminate_real_processes_this_test_started():
    """SIGTERM ends a plain child; one that ignores SIGTERM gets SIGKILL after the grace. Only our own children."""
    plain = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    stubborn = subprocess.Popen([sys.executable, '-c',
                                 'import signal, sys, time\n'
                                 'signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
                                 'sys.stdout.write("ready\\n"); sys.stdout.flush()\n'
                                 'time.sleep(60)\n'], stdout=subprocess.PIPE)
    try:
        assert stubborn.stdout.readline().strip() == b'ready'
        ops = gh.ProcOps()
        targets = []
        for proc in (plain, stubborn):
            info = gh.proc_info(proc.pid)
            targets.append({'pid': proc.pid, 'name': info['name'], 'starttime': info['starttime']})
        start = time.time()
        # our children become zombies until reaped: ProcOps counts a zombie as gone
        killed, remaining = gh.terminate(targets, term_grace=0.5, deadline=ops.now() + 60, ops=ops)
        elapsed = time.time() - start
        assert remaining == []
        assert dict((k['pid'], k['signal']) for k in killed) == {plain.pid: 'SIGTERM', stubborn.pid: 'SIGKILL'}
        # the grace was waited out before SIGKILL (no upper wall-clock bound: a loaded machine stretches it)
        seconds = dict((k['pid'], k['seconds']) for k in killed)
        assert 0.5 <= seconds[stubborn.pid] <= elapsed + 0.01   # (rounded to ms)
    finally:
        for proc in (plain, stubborn):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_alive_checks_start_time():
    ops = gh.ProcOps()
    info = gh.proc_info(os.getpid())
    assert ops.alive(os.getpid(), info['starttime'])
    assert not ops.alive(os.getpid(), info['starttime'] + 1)


class FakeSystemctl(object):
    def __init__(self, show='LoadState=loaded\nActiveState=active\n', stop_rc=0):
        self.show, self.stop_rc, self.calls = show, stop_rc, []

    def __call__(self, argv):
        self.calls.append(argv)
        if 'show' in argv:
            return 0, self.show, ''
        if 'stop' in argv:
            return self.stop_rc, '', ''
        return 0, '', ''


def test_stop_unit_bounded_then_killed():
    run = FakeSystemctl(stop_rc=124)
    got = gh.stop_unit(run, 'sglang.service', 60, now=iter([0.0, 2.5]).__next__)
    assert got == {'unit': 'sglang.service', 'before': 'active', 'result': 'killed', 'seconds': 2.5}
    assert run.calls[1:] == [['timeout', '60', 'systemctl', 'stop', 'sglang.service'],
                             ['systemctl', 'kill', '--signal=SIGKILL', 'sglang.service']]


def test_stop_unit_kills_a_failed_server_first():
    run = FakeSystemctl()
    got = gh.stop_unit(run, 'sglang.service', 60, vmid=129, kill=True)
    assert got['result'] == 'killed'
    assert run.calls[1:] == [['pct', 'exec', '129', '--', 'systemctl', 'kill', '--signal=SIGKILL', 'sglang.service'],
                             ['pct', 'exec', '129', '--', 'timeout', '60', 'systemctl', 'stop', 'sglang.service']]
    # check mode kills nothing
    run = FakeSystemctl()
    assert gh.stop_unit(run, 'sglang.service', 60, kill=True, check_mode=True)['result'] == 'would_stop'
    assert len(run.calls) == 1


def test_stop_unit_leaves_what_does_not_run_alone():
    for show, result in (('LoadState=not-found\nActiveState=inactive\n', 'not_loaded'),
                         ('LoadState=loaded\nActiveState=failed\n', 'not_active')):
        run = FakeSystemctl(show=show)
        assert gh.stop_unit(run, 'x.service', 5)['result'] == result
        assert len(run.calls) == 1


def test_stop_unit_in_a_container_goes_through_pct_exec():
    run = FakeSystemctl()
    got = gh.stop_unit(run, 'sglang.service', 8.5, vmid=129)
    assert got['result'] == 'stopped'
    assert run.calls[1] == ['pct', 'exec', '129', '--', 'timeout', '8.5', 'systemctl', 'stop', 'sglang.service']


def test_stop_unit_failure_raises_with_the_command():
    def run(argv):
        return 1, '', 'Access denied'
    with pytest.raises(RuntimeError, match='systemctl show .*Access denied'):
        gh.stop_unit(run, 'sglang.service', 5)
