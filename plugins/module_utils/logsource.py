# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a server's log lines come from: a plain file, or the journal of one systemd unit invocation.

Both sources yield ``(line, timestamp_or_None)`` lists from ``poll(wait)``; ``cursor()`` tells where
they stopped.  The journal source keeps one ``journalctl --follow`` child on a pipe and blocks on it
with ``select`` (a new line wakes it at once), or polls ``journalctl --after-cursor`` through the
module's ``run_command``.  Stdlib only, Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import select
import subprocess
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log


class FileLog(object):
    """Lines of a plain log file from ``since`` (a byte offset) on; survives truncation and rotation (reopens by path).

    Lines already there when watching starts get the file's modification time as their time stamp
    (the hang clock must not restart on every call); later lines get their arrival time.
    """

    def __init__(self, path, cursor=None, since=None):
        self.path = path
        self.offset = 0
        self.inode = None
        self.buf = b''
        self.caught_up = False
        if since:
            try:
                self.offset = int(since)
            except ValueError:
                raise ValueError('since must be a byte offset for a log file, got %r' % since)
        self.start_offset = self.offset
        if cursor and ':' in cursor:
            ino = cursor.split(':', 1)[0]
            try:
                if str(os.stat(path).st_ino) != ino:
                    self.offset = self.start_offset = 0   # rotated since the last call: a new file
            except OSError:
                pass

    def poll(self, wait):
        """Return a list of ``(line, timestamp_or_None)``; sleeps ``wait`` when nothing is new."""
        if not self.caught_up:
            self.caught_up = True
            try:
                mtime = os.stat(self.path).st_mtime
            except OSError:
                return []
            out = []
            while True:
                chunk = self._read()
                if not chunk:
                    break
                out.extend((line, mtime) for line in chunk)
            if out:
                return out
        lines = self._read()
        if not lines and wait > 0:
            time.sleep(wait)
            lines = self._read()
        return [(line, None) for line in lines]

    def _read(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.offset, self.buf = 0, b''     # rotated or truncated: a new file
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return []
        with open(self.path, 'rb') as f:
            f.seek(self.offset)
            data = f.read(8 * 1024 * 1024)
        self.offset += len(data)
        data = self.buf + data
        if b'\n' in data:
            complete, self.buf = data.rsplit(b'\n', 1)
        elif b'\r' in data:                    # tqdm updates end with a carriage return only
            complete, self.buf = data.rsplit(b'\r', 1)
        else:
            complete, self.buf = b'', data
        if not complete:
            return []
        return sglang_log.split_lines(complete.decode('utf-8', 'replace'))

    def cursor(self):
        return '%s:%d' % (self.inode if self.inode is not None else 0, self.offset - len(self.buf))

    def close(self):
        pass


class JournalLog(object):
    """Lines of one unit invocation from the journal, by ``journalctl -f`` on a pipe or by polling."""

    def __init__(self, run_command, journalctl, unit, invocation, since=None, mode='follow'):
        self.run_command = run_command
        self.journalctl = journalctl
        self.last_cursor = None
        self.proc = None
        self.buf = b''
        base = [journalctl, '--no-pager', '-o', 'json']
        if invocation:
            base += ['_SYSTEMD_INVOCATION_ID=%s' % invocation]
        else:
            base += ['_SYSTEMD_UNIT=%s' % unit]
            if since:
                base += ['--since', since]
        self.base = base
        self.mode = mode
        if mode == 'follow':
            try:
                self.proc = subprocess.Popen(base + ['--follow', '--lines=all'], stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, close_fds=True)
                self.fd = self.proc.stdout.fileno()
            except OSError:
                self.proc = None
                self.mode = 'poll'

    def _parse(self, raw_lines):
        out = []
        for raw in raw_lines:
            raw = raw.strip()
            if not raw:
                continue
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            msg = e.get('MESSAGE')
            if isinstance(msg, list):      # non-UTF-8 messages come as byte arrays
                msg = bytes(bytearray(x for x in msg if isinstance(x, int) and 0 <= x < 256)).decode('utf-8', 'replace')
            if e.get('__CURSOR'):
                self.last_cursor = e['__CURSOR']
            try:
                ts = int(e.get('__REALTIME_TIMESTAMP')) / 1e6
            except (TypeError, ValueError):
                ts = None
            for part in sglang_log.split_lines(msg or ''):
                out.append((part, ts))
        return out

    def sync(self):
        """Make journald process what it has queued before the next read.

        journald handles a sync request only after the messages already queued on its sockets, so after a
        process died this brings in the last lines it wrote (a traceback) even when journald lags behind.
        From then on the journal is read directly (``--after-cursor``) instead of through the follow pipe, whose
        own reader may not have caught up yet: the next poll returns everything the journal holds.
        """
        self.run_command([self.journalctl, '--sync'])
        if self.mode == 'follow':
            self.close()
            self.buf = b''               # a partial line was not parsed: the cursor read returns it whole
            self.mode = 'poll'

    def poll(self, wait):
        if self.mode == 'follow' and self.proc is not None:
            if self.proc.poll() is not None and not self.buf:
                self.mode = 'poll'           # journalctl went away: fall back
                return self.poll(wait)
            r, _w, _x = select.select([self.fd], [], [], max(wait, 0))
            if not r:
                return []
            data = os.read(self.fd, 1024 * 1024)
            if not data:
                self.proc.wait()
                self.mode = 'poll'
                return []
            self.buf += data
            if b'\n' not in self.buf:
                return []
            complete, self.buf = self.buf.rsplit(b'\n', 1)
            return self._parse(complete.decode('utf-8', 'replace').split('\n'))
        argv = list(self.base)
        if self.last_cursor:
            argv += ['--after-cursor', self.last_cursor]
        rc, out, _err = self.run_command(argv)
        lines = self._parse(out.split('\n')) if rc == 0 else []
        if not lines and wait > 0:
            time.sleep(wait)
        return lines

    def cursor(self):
        return self.last_cursor

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.terminate()
                self.proc.wait(2)
            except Exception:
                try:
                    self.proc.kill()
                except OSError:
                    pass
