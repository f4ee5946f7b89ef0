# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's deploy lock: a directory made with an atomic mkdir, holding ``owner.json``.

One deploy of a service holds it from preflight to the report (M(sglang_record) ``release_lock`` gives it back).
A second deploy finds it, reads who holds it, and stops before it changes anything. A lock older than
``stale_after`` seconds is taken over at once; a holder that is gone for another reason (the controller-side PID
check in the role) is taken over by a second call with ``take_over``.

``acquire(lock_dir, owner, now, stale_after, take_over, check_mode, module) -> dict``. Stdlib only, Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import stat

from ansible_collections.llmserve.sglang.plugins.module_utils import _files

OWNER = 'owner.json'
STATE_DIR_MODE = 0o700
# a lock without a readable owner.json is being taken right now; one that stays so for this long was left by a
# run that died between the mkdir and the write
EMPTY_STALE_AFTER = 60


class LockError(Exception):
    """The lock or its state directory cannot be made or read (names the path and the OS error)."""


def read_owner(lock_dir):
    """owner.json as a dict; {} when it is missing or not a JSON object (a lock being taken right now)."""
    try:
        with open(os.path.join(lock_dir, OWNER)) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_owner(lock_dir, owner, module=None):
    """Write owner.json (0600) atomically: a reader sees the old file or the new one."""
    _files.atomic_write(os.path.join(lock_dir, OWNER), json.dumps(owner, sort_keys=True) + '\n', 0o600, module=module)


def lock_age(lock_dir, holder, now):
    """Seconds since the holder took the lock (its ``since``, else the directory's mtime)."""
    since = holder.get('since')
    try:
        since = float(since)
    except (TypeError, ValueError):
        try:
            since = os.stat(lock_dir).st_mtime
        except OSError:
            since = now
    return max(0.0, now - since)


def ensure_state_dir(state_dir, check_mode):
    """Make the state directory (0700) or fix its mode. -> list of what was (or would be) done."""
    done = []
    try:
        mode = stat.S_IMODE(os.stat(state_dir).st_mode)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise LockError('%s: %s' % (state_dir, exc.strerror))
        if not check_mode:
            try:
                os.makedirs(state_dir, STATE_DIR_MODE)
                os.chmod(state_dir, STATE_DIR_MODE)  # makedirs' mode is masked by the umask
            except OSError as exc2:
                raise LockError('cannot create %s: %s' % (state_dir, exc2.strerror))
        return ['state_dir_created']
    if mode != STATE_DIR_MODE:
        if not check_mode:
            os.chmod(state_dir, STATE_DIR_MODE)
        done.append('state_dir_mode_set')
    return done


def acquire(lock_dir, owner, now, stale_after=None, take_over=False, check_mode=False, module=None):
    """Take the lock for ``owner`` (a dict, written to owner.json).

    -> dict(taken, took_over, holder, age, stale, done): ``taken`` True when this run holds the lock now (or would,
    in check mode); ``took_over`` the previous holder when it was replaced; ``holder`` and ``age`` describe the
    lock that was there (empty and None when there was none); ``stale`` True when it was older than ``stale_after``;
    ``done`` what was done to the state directory (a change: ``state_dir_created``, ``state_dir_mode_set``).
    ``module``: the AnsibleModule, whose ``atomic_move`` puts owner.json in place (else ``os.rename``).
    """
    result = {'taken': False, 'took_over': None, 'holder': {}, 'age': None, 'stale': False,
              'done': ensure_state_dir(os.path.dirname(lock_dir.rstrip('/')) or '/', check_mode)}
    if check_mode:
        if not os.path.isdir(lock_dir):
            result['taken'] = True
            return result
    else:
        try:
            os.mkdir(lock_dir, 0o700)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise LockError('cannot create the lock %s: %s' % (lock_dir, exc.strerror))
        else:
            write_owner(lock_dir, owner, module=module)
            result['taken'] = True
            return result
    holder = read_owner(lock_dir)
    result['holder'] = holder
    result['age'] = round(lock_age(lock_dir, holder, now), 1)
    result['stale'] = ((stale_after is not None and result['age'] > float(stale_after))
                       or (not holder and result['age'] > EMPTY_STALE_AFTER))
    if take_over or result['stale']:
        if not check_mode:
            write_owner(lock_dir, dict(owner, took_over=holder or None), module=module)
        result['taken'] = True
        result['took_over'] = holder or {'unknown': True}
    return result
