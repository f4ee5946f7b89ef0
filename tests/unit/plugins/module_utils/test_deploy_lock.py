# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy_lock: one mkdir wins, the loser reads the holder, stale and ownerless locks are taken over."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

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
