# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files written so that a reader sees the old content or the new one, never a part: the collection's one atomic write.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat
import tempfile


def read_bytes(path):
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def read_text(path):
    """The file's text (UTF-8), or None when it does not exist."""
    data = read_bytes(path)
    return None if data is None else data.decode('utf-8')


def file_mode(path):
    """The permission bits of path, or None when it does not exist."""
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None


def atomic_write(path, data, mode, module=None):
    """Write data (bytes or text) to path atomically with the given mode.

    A temporary file in the same directory is written and synced with the mode, then moved over path:
    with ``module.atomic_move`` when a module is given (SELinux context and the workarounds of exotic
    file systems), else with ``os.rename`` (controller-side callers). path has the mode from the
    moment it holds the data, also when it is new (``atomic_move`` would give a new file 0666 less
    the umask, and a replaced one the old file's mode and owner): a secret written 0600 is never
    readable by others in between. The file belongs to the user that writes it.
    """
    if not isinstance(data, bytes):
        data = data.encode('utf-8')
    directory = os.path.dirname(path) or '.'
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if module is not None:
            _module_move(module, tmp, path, mode)
        else:
            os.rename(tmp, path)
        os.chmod(path, mode)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _module_move(module, tmp, path, mode):
    """``module.atomic_move`` that keeps tmp's mode and owner, and creates a new path with mode (through the umask)."""
    previous = os.umask(0o777 & ~mode)
    try:
        module.atomic_move(tmp, path, keep_dest_attrs=False)
    finally:
        os.umask(previous)


def write_if_changed(path, data, mode, check_mode=False, module=None):
    """Write atomically unless path already holds data with mode. True when it changed (or would, in check mode)."""
    if not isinstance(data, bytes):
        data = data.encode('utf-8')
    if read_bytes(path) == data and file_mode(path) == mode:
        return False
    if not check_mode:
        atomic_write(path, data, mode, module=module)
    return True


def backup(path, backup_dir, keep, stamp, module=None):
    """Copy path to backup_dir/NAME.STAMP (0600), keep the newest ``keep`` copies of NAME; the copy's path or None."""
    data = read_bytes(path)
    if data is None:
        return None
    if not os.path.isdir(backup_dir):
        os.makedirs(backup_dir, 0o700)
    base = os.path.basename(path)
    target = os.path.join(backup_dir, '%s.%s' % (base, stamp))
    atomic_write(target, data, 0o600, module=module)
    olds = sorted(name for name in os.listdir(backup_dir) if name.startswith(base + '.') and not name.startswith('.'))
    for name in olds[:max(0, len(olds) - keep)]:
        os.unlink(os.path.join(backup_dir, name))
    return target
