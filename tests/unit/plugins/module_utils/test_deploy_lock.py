# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy_lock: one mkdir wins, the loser reads the holder, stale and ownerless locks are taken over."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import multiprocessing
import os
import stat
import time

import pytest

from ansible_collections.llmserve.sglang.plugins.module_utils import deploy_lock

NOW = 1795986656.0
ME = {'controller': 'ctl-a', 'pid': 200, 'since': int(NOW), 'host': 'gpu01'}
OTHER = {'controller': 'ctl-b', 'pid': 100, 'since': int(NOW) - 30, 'host': 'gpu01'}


@pytest.fixture
def lock(tmp_path):
    return str(tmp_path / 'state' / 'sglang' / 'deploy.lock')


def owner_of(lock_dir):
    with open(os.path.join(lock_dir, deploy_lock.OWNER)) as handle:
        return json.load(handle)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_free_lock_is_taken_and_state_dir_made_0700(lock):
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=3600)
    assert res['taken'] and res['took_over'] is None and res['holder'] == {} and res['age'] is None
    assert res['done'] == ['state_dir_created']
    assert mode(os.path.dirname(lock)) == 0o700
    assert owner_of(lock) == ME and mode(os.path.join(lock, deploy_lock.OWNER)) == 0o600


def test_state_dir_mode_is_fixed(lock):
    os.makedirs(os.path.dirname(lock))
    os.chmod(os.path.dirname(lock), 0o755)
    res = deploy_lock.acquire(lock, ME, NOW)
    assert res['taken'] and res['done'] == ['state_dir_mode_set'] and mode(os.path.dirname(lock)) == 0o700


def test_held_lock_names_its_holder_and_is_left_alone(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=3600)
    assert not res['taken'] and res['holder'] == OTHER and res['age'] == 30.0 and not res['stale']
    assert res['done'] == [] and owner_of(lock) == OTHER


@pytest.mark.parametrize('stale_after, taken', [(29, True), (30, False), (None, False)])
def test_stale_lock_is_taken_over_at_once(lock, stale_after, taken):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=stale_after)
    assert res['taken'] is taken and res['stale'] is taken
    if taken:
        assert res['took_over'] == OTHER and owner_of(lock) == dict(ME, took_over=OTHER)
    else:
        assert res['took_over'] is None and owner_of(lock) == OTHER


def test_take_over_on_request(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=3600, take_over=True)
    assert res['taken'] and not res['stale'] and res['took_over'] == OTHER
    assert owner_of(lock)['took_over'] == OTHER and owner_of(lock)['pid'] == ME['pid']


@pytest.mark.parametrize('age, taken', [(10, False), (61, True)])
def test_ownerless_lock(lock, age, taken):
    os.makedirs(lock)
    os.utime(lock, (NOW - age, NOW - age))
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=3600)
    assert res['holder'] == {} and res['taken'] is taken and res['age'] == float(age)
    if taken:
        assert res['took_over'] == {'unknown': True}


def test_garbled_owner_file_reads_as_no_owner(lock):
    os.makedirs(lock)
    with open(os.path.join(lock, deploy_lock.OWNER), 'w') as handle:
        handle.write('{half')
    assert deploy_lock.read_owner(lock) == {}


def test_check_mode_changes_nothing(lock):
    res = deploy_lock.acquire(lock, ME, NOW, check_mode=True)
    assert res['taken'] and res['done'] == ['state_dir_created'] and not os.path.exists(os.path.dirname(lock))
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    res = deploy_lock.acquire(lock, ME, NOW, take_over=True, check_mode=True)
    assert res['taken'] and res['took_over'] == OTHER and owner_of(lock) == OTHER


def test_state_dir_under_a_file_is_a_clear_error(tmp_path):
    (tmp_path / 'state').write_text('a file where the state directory should be')
    with pytest.raises(deploy_lock.LockError) as err:
        deploy_lock.acquire(str(tmp_path / 'state' / 'sglang' / 'deploy.lock'), ME, NOW)
    assert str(tmp_path / 'state' / 'sglang') in str(err.value) and 'Not a directory' in str(err.value)


def test_owner_file_text_and_mode_with_a_module(lock):
    moves = []

    class Module(object):
        def atomic_move(self, src, dest, **kwargs):
            moves.append(dest)
            os.rename(src, dest)

    deploy_lock.acquire(lock, OTHER, NOW - 30, module=Module())
    res = deploy_lock.acquire(lock, ME, NOW, take_over=True, module=Module())
    path = os.path.join(lock, deploy_lock.OWNER)
    assert res['taken'] and moves == [path, path]
    with open(path) as handle:
        assert handle.read() == json.dumps(dict(ME, took_over=OTHER), sort_keys=True) + '\n'
    assert mode(path) == 0o600 and os.listdir(lock) == [deploy_lock.OWNER]


def _racer(lock_dir, me, start, wins, decided, stale_after, take_over):
    """One run taking a stale lock over: the pause after its decision widens the race window."""
    import random

    def pause():
        decided.put(me['pid'])
        time.sleep(random.random() * 0.002)
    deploy_lock.BEFORE_CLAIM = pause
    start.wait()
    res = deploy_lock.acquire(lock_dir, me, NOW, stale_after=stale_after, take_over=take_over,
                              expect=OTHER if take_over else None)
    wins.put((me['pid'], res['taken'], res['holder'].get('pid')))


@pytest.mark.parametrize('stale_after, take_over', [(10, False), (None, True)])
def test_two_takeovers_race_exactly_one_wins(tmp_path, stale_after, take_over):
    """200 races of two runs that both find the same stale (or gone) lock: one owner each time, the loser told who."""
    ctx = multiprocessing.get_context('fork')
    both_decided = untold = fresh = 0
    for race in range(200):
        lock_dir = str(tmp_path / ('r%d' % race) / 'deploy.lock')
        deploy_lock.acquire(lock_dir, OTHER, NOW - 30)
        start, wins, decided = ctx.Barrier(2), ctx.Queue(), ctx.Queue()
        runs = [ctx.Process(target=_racer, args=(lock_dir, dict(ME, pid=pid), start, wins, decided, stale_after,
                                                 take_over)) for pid in (201, 202)]
        for run in runs:
            run.start()
        results = [wins.get(timeout=30) for dummy in runs]
        for run in runs:
            run.join(30)
        both_decided += sum(1 for dummy in runs if not decided.empty() and decided.get(timeout=5)) == 2
        winners = [pid for pid, taken, dummy in results if taken]
        assert len(winners) == 1, 'race %d: %r' % (race, results)
        loser = [holder for pid, taken, holder in results if not taken][0]
        # the loser names the winner, or (a winner that has not written its owner file within 3 s, on a busy
        # machine) says a run is taking the lock right now
        assert loser in (winners[0], None), 'race %d: the loser was told another run: %r' % (race, results)
        untold += loser is None
        owner = owner_of(lock_dir)
        # the winner replaced the stale lock, or (a run slowed between the first mkdir and the rest, on a busy
        # machine) its mkdir came while the takeover had the stale lock set aside: a fresh lock
        assert owner['pid'] == winners[0] and owner.get('took_over', 'fresh') in (OTHER, 'fresh')
        fresh += 'took_over' not in owner
        assert os.listdir(os.path.dirname(lock_dir)) == ['deploy.lock'], 'the stale lock was not cleaned away'
    # both runs had judged the lock stale before either claimed it, in half the races or more: the race was real
    assert both_decided >= 100
    assert untold <= 10, '%d losers of 200 were not told the winner' % untold
    assert fresh <= 10, 'in %d races of 200 the winner made a fresh lock instead of taking the stale one over' % fresh


def test_late_racer_sees_the_new_lock(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    first = deploy_lock.acquire(lock, ME, NOW, stale_after=10)
    late = deploy_lock.acquire(lock, dict(ME, pid=999, since=int(NOW)), NOW, stale_after=10)
    assert first['taken'] and not late['taken'] and late['holder']['pid'] == ME['pid'] and not late['stale']


def test_claim_left_by_a_dead_run_is_broken_after_a_minute(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    marker = os.path.join(lock, deploy_lock.TAKEOVER)
    open(marker, 'w').close()
    os.utime(marker, (NOW - 10, NOW - 10))
    fresh = deploy_lock.acquire(lock, ME, NOW, stale_after=10)
    assert not fresh['taken'] and owner_of(lock) == OTHER  # a takeover may be under way
    os.utime(marker, (NOW - 61, NOW - 61))
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=10)
    assert res['taken'] and owner_of(lock)['pid'] == ME['pid']
    assert not os.path.exists(marker)


def test_check_mode_takes_over_nothing(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=10, check_mode=True)
    assert res['taken'] and res['took_over'] == OTHER and owner_of(lock) == OTHER


def test_release_leaves_a_lock_another_run_took_over(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    assert deploy_lock.acquire(lock, ME, NOW, stale_after=10)['taken']
    assert deploy_lock.release(lock, OTHER) is False and owner_of(lock)['pid'] == ME['pid']
    assert deploy_lock.release(lock, ME) is True and not os.path.exists(lock)
    assert deploy_lock.release(lock, ME) is False


CMDLINES = {100: 'python3 /usr/bin/ansible-playbook deploy.yml', 101: 'sleep 100', 102: ''}


@pytest.mark.parametrize('holder, taken, take_over', [
    (dict(ME, pid=100), False, False),            # same controller, playbook alive
    (dict(ME, pid=101), False, True),             # same controller, PID reused by another program
    (dict(ME, pid=102), False, True),             # same controller, no such process
    (dict(OTHER, pid=101), False, False),         # another controller: its PIDs are not ours to read
    ({}, False, False),                           # a lock being taken right now
    (dict(ME, pid='x'), False, False),
    (OTHER, True, False),
])
def test_verdict(holder, taken, take_over):
    res = deploy_lock.verdict({'taken': taken, 'holder': holder}, ME, '/s/deploy.lock', 21600, 'gpu01',
                              CMDLINES.get)
    assert res['take_over'] is take_over
    if taken:
        assert res['busy'] == ''
    else:
        assert res['busy'].startswith('gpu01 is being deployed by another run: ')
        assert '(lock /s/deploy.lock)' in res['busy'] and 'sglang_lock_stale_after=21600 s' in res['busy']


def test_busy_message_names_the_holder():
    msg = deploy_lock.busy_message('gpu01', OTHER, '/s/deploy.lock', 60)
    assert 'ansible-playbook pid 100 on ctl-b since 2026-11-29 21:10:26 UTC' in msg
    assert 'a run that is taking the lock right now' in deploy_lock.busy_message('gpu01', {}, '/s/l', 60)


def test_proc_cmdline_reads_nul_separated_arguments(tmp_path):
    (tmp_path / '42').mkdir()
    (tmp_path / '42' / 'cmdline').write_bytes(b'python3\0/usr/bin/ansible-playbook\0deploy.yml\0')
    assert deploy_lock.proc_cmdline(42, str(tmp_path)) == 'python3 /usr/bin/ansible-playbook deploy.yml'
    assert deploy_lock.proc_cmdline(43, str(tmp_path)) == ''
    assert 'python' in deploy_lock.proc_cmdline(os.getpid())


def test_take_over_only_the_holder_judged_gone(lock):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    newer = dict(OTHER, pid=101, since=int(NOW) - 5)
    assert deploy_lock.acquire(lock, newer, NOW, take_over=True, expect=OTHER)['taken']
    res = deploy_lock.acquire(lock, ME, NOW, take_over=True, expect=OTHER)
    assert not res['taken'] and res['holder']['pid'] == 101 and owner_of(lock)['pid'] == 101


def test_a_fresh_mkdir_while_a_takeover_has_the_stale_lock_aside_wins(lock, monkeypatch):
    """A run whose mkdir comes in the moment a takeover has set the stale lock aside holds a fresh lock (naming no
    previous holder); the takeover's run is told it."""
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    late = dict(ME, pid=300)
    real_make = deploy_lock._make
    runs = []

    def make(path, owner, module):
        if owner.get('took_over') and not runs:     # the takeover, between its rename aside and its mkdir
            assert not os.path.exists(lock)
            runs.append(deploy_lock.acquire(lock, late, NOW, stale_after=10))
        return real_make(path, owner, module)
    monkeypatch.setattr(deploy_lock, '_make', make)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=10)
    assert runs[0]['taken'] and runs[0]['took_over'] is None and owner_of(lock) == late
    assert not res['taken'] and res['holder'] == late
    assert os.listdir(os.path.dirname(lock)) == ['deploy.lock'], 'the stale lock was not cleaned away'


def test_a_lock_given_back_between_mkdir_and_open_is_taken_fresh(lock, monkeypatch):
    deploy_lock.acquire(lock, OTHER, NOW - 30)
    real_make = deploy_lock._make
    calls = []

    def make(path, owner, module):
        made = real_make(path, owner, module)
        if not calls:
            assert not made     # the lock was there; it is given back before this run opens it
            deploy_lock.release(lock, OTHER)
        calls.append(owner)
        return made
    monkeypatch.setattr(deploy_lock, '_make', make)
    res = deploy_lock.acquire(lock, ME, NOW, stale_after=10)
    assert res['taken'] and res['took_over'] is None and owner_of(lock) == ME and calls == [ME, ME]
