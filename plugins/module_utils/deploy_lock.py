# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's deploy lock: a directory made with an atomic mkdir, holding ``owner.json``.

One deploy of a service holds it from preflight to the report (M(sglang_record) ``release_lock`` gives it back).
A second deploy finds it, reads who holds it, and stops before it changes anything. A lock older than
``stale_after`` seconds is taken over at once; a holder that is gone for another reason (``verdict``: a run of the
same controller whose ansible-playbook process is gone) is taken over by a second call with ``take_over``.

A takeover is one owner's: the run that replaces a lock first creates ``takeover`` in it with O_EXCL (one of any
number of racers succeeds), checks the path still names that directory, renames it aside and makes a new lock with
mkdir. A racer that lost is told the winner as the holder. A run whose mkdir comes in the moment a takeover has the
stale lock renamed aside makes a fresh lock, which names no previous holder; the takeover's run is then the one told.

``acquire(lock_dir, owner, now, stale_after, take_over, check_mode, module) -> dict``;
``verdict(result, me, lock_dir, stale_after, host, cmdline) -> dict(take_over, busy)``;
``release(lock_dir, owner) -> bool``. Stdlib only, Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import json
import os
import shutil
import stat
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import _files

OWNER = 'owner.json'
# made exclusively (O_EXCL) in a stale lock by the one run that replaces it
TAKEOVER = 'takeover'
STATE_DIR_MODE = 0o700
# a lock without a readable owner.json is being taken right now; one that stays so for this long was left by a
# run that died between the mkdir and the write
EMPTY_STALE_AFTER = 60


class LockError(Exception):
    """The lock or its state directory cannot be made or read (names the path and the OS error)."""


def read_owner(lock_dir, dir_fd=None):
    """owner.json as a dict; {} when it is missing or not a JSON object (a lock being taken right now).

    With ``dir_fd`` (an open descriptor of the lock directory) the file is read in that directory whatever its name now.
    """
    try:
        if dir_fd is None:
            fd = os.open(os.path.join(lock_dir, OWNER), os.O_RDONLY)
        else:
            fd = os.open(OWNER, os.O_RDONLY, dir_fd=dir_fd)
        with os.fdopen(fd) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_owner(lock_dir, owner, module=None):
    """Write owner.json (0600) atomically: a reader sees the old file or the new one."""
    _files.atomic_write(os.path.join(lock_dir, OWNER), json.dumps(owner, sort_keys=True) + '\n', 0o600, module=module)


def same_owner(a, b):
    """True when two owner records name the same run (controller, ansible-playbook PID and start time)."""
    return bool(a) and bool(b) and all(a.get(k) == b.get(k) for k in ('controller', 'pid', 'since'))


def lock_age(lock_dir, holder, now, mtime=None):
    """Seconds since the holder took the lock (its ``since``, else the directory's mtime)."""
    since = holder.get('since')
    try:
        since = float(since)
    except (TypeError, ValueError):
        since = mtime
        if since is None:
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


def acquire(lock_dir, owner, now, stale_after=None, take_over=False, check_mode=False, module=None, expect=None):
    """Take the lock for ``owner`` (a dict, written to owner.json).

    ``take_over``: replace whoever holds it; with ``expect`` (an owner record) only while that run still holds it,
    so that a lock another run took over in the meantime is left to that run.

    -> dict(taken, took_over, holder, age, stale, done): ``taken`` True when this run holds the lock now (or would,
    in check mode); ``took_over`` the previous holder when it was replaced; ``holder`` and ``age`` describe the
    lock that was there (empty and None when there was none; when another run won the takeover, that run);
    ``stale`` True when it was older than ``stale_after``; ``done`` what was done to the state directory (a change:
    ``state_dir_created``, ``state_dir_mode_set``).
    ``module``: the AnsibleModule, whose ``atomic_move`` puts owner.json in place (else ``os.rename``).
    """
    result = {'taken': False, 'took_over': None, 'holder': {}, 'age': None, 'stale': False,
              'done': ensure_state_dir(os.path.dirname(lock_dir.rstrip('/')) or '/', check_mode)}
    if check_mode:
        if not os.path.isdir(lock_dir):
            result['taken'] = True
            return result
        holder = read_owner(lock_dir)
        _judge(result, lock_dir, holder, now, stale_after, None)
        if _wanted(take_over, expect, holder, result['stale']):
            result['taken'] = True
            result['took_over'] = holder or {'unknown': True}
        return result
    if _make(lock_dir, owner, module):
        result['taken'] = True
        return result
    try:
        fd = os.open(lock_dir, os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise LockError('cannot open the lock %s: %s' % (lock_dir, exc.strerror))
        # given back between our mkdir and open: one more try, as a fresh lock
        result['taken'] = _make(lock_dir, owner, module)
        if not result['taken']:
            result['holder'] = _read_settled(lock_dir)
        return result
    try:
        holder = _read_settled(lock_dir, dir_fd=fd)
        _judge(result, lock_dir, holder, now, stale_after, os.fstat(fd).st_mtime)
        if _wanted(take_over, expect, holder, result['stale']):
            _take_over(result, fd, lock_dir, holder, owner, now, module)
    finally:
        os.close(fd)
    return result


def _wanted(take_over, expect, holder, stale):
    return stale or bool(take_over and (not expect or same_owner(holder, expect)))


def _read_settled(lock_dir, dir_fd=None, wait=3.0, step=0.01):
    """The lock's owner; a lock just made gets ``wait`` seconds to get its owner file."""
    deadline = time.time() + wait
    holder = read_owner(lock_dir, dir_fd=dir_fd)
    while not holder and time.time() < deadline:
        time.sleep(step)
        holder = read_owner(lock_dir, dir_fd=dir_fd)
    return holder


def _judge(result, lock_dir, holder, now, stale_after, mtime):
    result['holder'] = holder
    result['age'] = round(lock_age(lock_dir, holder, now, mtime), 1)
    result['stale'] = ((stale_after is not None and result['age'] > float(stale_after))
                       or (not holder and result['age'] > EMPTY_STALE_AFTER))


def _make(lock_dir, owner, module):
    """mkdir the lock and write its owner: True when this call made it, False when it was there."""
    try:
        os.mkdir(lock_dir, 0o700)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise LockError('cannot create the lock %s: %s' % (lock_dir, exc.strerror))
        return False
    write_owner(lock_dir, owner, module=module)
    return True


# called once a takeover is decided and before it is claimed (tests widen the race window with it)
BEFORE_CLAIM = None


def _claim(fd, now):
    """Claim the lock directory open as ``fd`` for a takeover: create TAKEOVER in it exclusively.

    Exactly one caller per directory succeeds, however many found it stale. A claim left by a run that died in the
    middle of a takeover (older than EMPTY_STALE_AFTER) is moved aside by one caller (a rename) and claimed again.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for dummy in range(2):
        try:
            os.close(os.open(TAKEOVER, flags, 0o600, dir_fd=fd))
            return True
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # the directory was replaced and removed already
                return False
            if exc.errno != errno.EEXIST:
                raise LockError('cannot claim the lock: %s' % exc.strerror)
        try:
            if now - os.stat(TAKEOVER, dir_fd=fd).st_mtime <= EMPTY_STALE_AFTER:
                return False
            os.rename(TAKEOVER, '%s.dead.%d' % (TAKEOVER, os.getpid()), src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            return False
    return False


def _take_over(result, fd, lock_dir, holder, owner, now, module):
    """Replace the lock open as ``fd`` (judged stale or gone): claim it, rename it aside, mkdir a new one.

    The loser of a race is left with ``taken`` False and, as ``holder``, the run that won (when it shows within a
    few seconds).
    """
    if BEFORE_CLAIM is not None:
        BEFORE_CLAIM()
    aside = '%s.stale.%d.%s' % (lock_dir.rstrip('/'), os.getpid(), binascii.hexlify(os.urandom(4)).decode('ascii'))
    ours = os.fstat(fd)
    claimed = _claim(fd, now)
    if claimed:
        try:
            here = os.stat(lock_dir)
            # the path still names the directory we claimed (else it was replaced and is being removed)
            claimed = (here.st_dev, here.st_ino) == (ours.st_dev, ours.st_ino)
            if claimed:
                os.rename(lock_dir, aside)
        except OSError:
            claimed = False
        if not claimed:
            try:
                os.unlink(TAKEOVER, dir_fd=fd)
            except OSError:
                pass
    if claimed and _make(lock_dir, dict(owner, took_over=holder or None), module):
        _remove(aside)
        result['taken'] = True
        result['took_over'] = holder or {'unknown': True}
        return
    if claimed:
        _remove(aside)
    result['holder'] = _winner(lock_dir, ours, holder)


def _remove(path, tries=100, step=0.01):
    """Remove a lock set aside; a racer that claimed it a moment late takes its claim back, so try again."""
    for dummy in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        time.sleep(step)


def _winner(lock_dir, ours, holder, wait=3.0, step=0.02):
    """The owner of the lock that replaced the directory ``ours`` (its stat), waited for up to ``wait`` seconds."""
    deadline = time.time() + wait
    while True:
        try:
            here = os.stat(lock_dir)
        except OSError:
            here = None
        if here is not None and (here.st_dev, here.st_ino) != (ours.st_dev, ours.st_ino):
            found = read_owner(lock_dir)
            if found:
                return found
        if time.time() >= deadline:
            return holder
        time.sleep(step)


def release(lock_dir, owner=None):
    """Give the lock back: remove it when ``owner`` (if given) is still its owner. -> True when it was removed.

    A lock another run took over (its owner.json names that run) is left alone. The directory is renamed aside
    first, so a reader never sees half a lock.
    """
    if not os.path.isdir(lock_dir):
        return False
    if owner and not same_owner(read_owner(lock_dir), owner):
        return False
    aside = '%s.released.%d' % (lock_dir.rstrip('/'), os.getpid())
    try:
        os.rename(lock_dir, aside)
    except OSError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def holder_gone(holder, me, cmdline):
    """True when ``holder`` is a run of this controller (``me``) whose ansible-playbook process is gone.

    ``cmdline(pid)`` returns that process's command line on the controller ('' when there is none).
    """
    if not holder or holder.get('controller') != me.get('controller'):
        return False
    try:
        pid = int(holder.get('pid'))
    except (TypeError, ValueError):
        return False
    return pid > 0 and 'ansible' not in (cmdline(pid) or '')


def busy_message(host, holder, lock_dir, stale_after):
    """What a run that did not get the lock tells the user: who holds it since when, and what to do."""
    if holder.get('pid') is not None:
        try:
            since = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(int(holder.get('since'))))
        except (TypeError, ValueError):
            since = 'an unknown time'
        who = 'ansible-playbook pid %s on %s since %s' % (holder['pid'], holder.get('controller'), since)
    else:
        who = 'a run that is taking the lock right now'
    return ('%s is being deployed by another run: %s (lock %s). Wait for it to finish and run again; if that run is '
            'gone, remove %s (it is taken over by itself after sglang_lock_stale_after=%s s).'
            % (host, who, lock_dir, lock_dir, stale_after))


def verdict(result, me, lock_dir, stale_after, host, cmdline):
    """Judge an ``acquire`` result on the controller -> dict(take_over, busy).

    ``take_over``: the lock is another run's of this controller that is gone (call ``acquire`` with ``take_over``);
    ``busy``: '' when the lock is ours, else the message naming the holder.
    """
    if result.get('taken'):
        return {'take_over': False, 'busy': ''}
    holder = result.get('holder') or {}
    return {'take_over': holder_gone(holder, me, cmdline),
            'busy': busy_message(host, holder, lock_dir, stale_after)}


def proc_cmdline(pid, proc='/proc'):
    """The command line of process ``pid`` ('' when there is none), arguments joined by spaces."""
    try:
        with open(os.path.join(proc, str(int(pid)), 'cmdline'), 'rb') as handle:
            return handle.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip()
    except (IOError, OSError, ValueError):
        return ''
