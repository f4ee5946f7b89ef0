# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ranks of an SGLang server in its process tree: a scheduler's or detokenizer's death, seen when it happens.

SGLang's main process notices a dead child with its own watchdog thread, which looks once a second, and only then
logs it ("Subprocess scheduler_0 (pid=N) crashed with exit code -9"). /proc shows the death at once: the child is
a zombie (its wait status in /proc/PID/stat) until the main process reaps it, or it is gone. :class:`RankWatch`
notes each rank of the server's main process as it appears and says, at the first poll after one died while the
main process lives, which one it was and how it ended.

Where the processes come from: the unit's cgroup (``cgroup.procs``) when systemd names one and it holds the main
process, else every process of /proc; either way only the main process's descendants count. Private to this
collection; stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.plugins.module_utils.gpu_holders import parse_stat, read_text

PROC = '/proc'
CGROUP = '/sys/fs/cgroup'
# The titles SGLang 0.5.23 gives its ranks with setproctitle (sglang/srt):
#   managers/scheduler.py:6294            "sglang::scheduler" + the log prefix with "_" for spaces:
#                                         "sglang::scheduler_TP1" (tp > 1), "sglang::scheduler_DP0_TP1" (dp)
#   managers/detokenizer_manager.py:551   "sglang::detokenizer"
#   managers/multi_tokenizer_mixin.py:821 "sglang::detokenizer_router" (several HTTP workers)
# Not ranks (they may come and go): "sglang::data_parallel_controller" (data_parallel_controller.py:955),
# "sglang::tokenizer_worker:PID" (multi_tokenizer_mixin.py:847), compile workers, the resource tracker.
# setproctitle also sets the kernel's comm, cut to 15 bytes ("sglang::schedul", "sglang::detoken"): a forked
# child whose command line is still its parent's (the lab's fake SGLang) is known by its comm.
RANK_TITLES = ('sglang::scheduler', 'sglang::detokenizer')
TITLE_PREFIX = 'sglang::'
COMM_LEN = 15
MAX_DEPTH = 16      # a rank is a child of the main process or of a data parallel controller; deeper is not ours


def proc_root():
    """Where /proc is (the module's tests point it at a fake tree)."""
    return PROC


def cgroup_root():
    """Where the cgroup file system is mounted."""
    return CGROUP


def is_rank(title):
    """True for a scheduler's or detokenizer's title, or its comm (the title's first 15 bytes)."""
    for rank_title in RANK_TITLES:
        if title.startswith(rank_title) or (len(title) == COMM_LEN and rank_title.startswith(title)):
            return True
    return False


def stat_of(pid, root=PROC):
    """``/proc/PID/stat`` as :func:`gpu_holders.parse_stat` reads it, plus ``exit_status``: a zombie's wait status
    (field 52, Linux >= 3.5), else None; None when the process is gone."""
    text = read_text(os.path.join(root, str(pid), 'stat'))
    try:
        st = parse_stat(text)
    except ValueError:
        return None
    if st is None:
        return None
    fields = text[text.rfind(')') + 2:].split()
    st['exit_status'] = None
    if st['state'] in ('Z', 'X') and len(fields) >= 50 and fields[49].lstrip('-').isdigit():
        st['exit_status'] = int(fields[49])
    return st


def title_of(pid, comm, root=PROC):
    """The process title (``sglang::scheduler_TP1``) from its command line, else its comm."""
    first = (read_text(os.path.join(root, str(pid), 'cmdline')) or '').split('\x00')[0].strip()
    return first if first.startswith(TITLE_PREFIX) else comm


def exit_facts(status):
    """A wait status -> ``(exit_code, signal)``, exit_code as multiprocessing gives it (``-9`` for SIGKILL)."""
    if status is None:
        return None, None
    if status & 0x7f:
        return -(status & 0x7f), status & 0x7f
    return (status >> 8) & 0xff, None


def death(title, pid, status, main_pid):
    """What await_server_ready reports for a rank that ended (the keys of its ``child_exit``)."""
    code, sig = exit_facts(status)
    if sig is not None:
        how = 'signal %d/%s' % (sig, sglang_log.signal_name(sig))
    elif code is not None:
        how = 'exit status %d' % code
    else:
        how = 'exit status unknown'
    return {
        'name': title,
        'pid': pid,
        'exit_code': code,
        'signal': sig,
        'signal_name': sglang_log.signal_name(sig) if sig is not None else None,
        'reason': 'killed' if sig in sglang_log.KILL_SIGNALS else 'crashed',
        'line': '%s (pid %d) exited (%s), main process %d still running' % (title, pid, how, main_pid),
    }


def unit_pids(control_group, croot=CGROUP):
    """The PIDs in a unit's cgroup as systemd names it (``/system.slice/x.service``; cgroup v2, or v1's named
    systemd hierarchy), or None when it cannot be read."""
    if not control_group:
        return None
    for sub in ('', 'unified', 'systemd'):
        text = read_text(os.path.join(croot, sub, control_group.lstrip('/'), 'cgroup.procs'))
        if text is not None:
            return [int(word) for word in text.split() if word.isdigit()]
    return None


def all_pids(root=PROC):
    try:
        return [int(name) for name in os.listdir(root) if name.isdigit()]
    except OSError:
        return []


def descends(pid, stats, main_pid):
    """True when ``main_pid`` is an ancestor of ``pid`` (through the parents in ``stats``)."""
    for _step in range(MAX_DEPTH):
        st = stats.get(pid)
        if st is None:
            return False
        pid = st['ppid']
        if pid == main_pid:
            return True
    return False


class RankWatch(object):
    """The ranks (schedulers, detokenizers) under one main process, polled cheaply.

    ``poll(now, main_pid, control_group)`` reads /proc at most once every ``every`` seconds: the stat file of each
    rank noted so far, and every ``scan_every`` seconds the unit's processes for new ranks (every ``full_scan_every``
    seconds all of /proc, where there is no cgroup to read: a rank not noted yet is still seen as a zombie). It
    returns :func:`death`'s dict for the first rank that is gone, a zombie with a non-zero status, or a new process
    under its PID, while the main process lives; else None. A rank that exited 0 is no death (SGLang's own watchdog
    lets it be). Ranks are noted per main process (PID and start time): those of an earlier launch never count.
    A process with a rank's title whose parent has the same title (a rank's subprocess before it runs its program)
    is no rank, and a noted one that runs another program is forgotten: a helper, not a rank.
    """

    def __init__(self, root=None, croot=None, every=0.1, scan_every=0.5, full_scan_every=2.0):
        self.root = root or proc_root()
        self.croot = croot or cgroup_root()
        self.every = every
        self.scan_every = scan_every
        self.full_scan_every = full_scan_every
        self.scan_gap = scan_every      # until the next scan: scan_every, or full_scan_every after a scan of /proc
        self.main = None        # (pid, starttime) of the main process the ranks belong to
        self.ranks = {}         # pid -> (title, starttime)
        self.checked_at = None
        self.scanned_at = None
        self.checks = 0

    def poll(self, now, main_pid, control_group=None):
        # a tick a little early still counts: the wait's ticks are every ~0.1 s, not to the microsecond
        if self.checked_at is not None and now - self.checked_at < self.every * 0.9:
            return None
        self.checked_at = now
        self.checks += 1
        st = stat_of(main_pid, self.root) if main_pid else None
        if st is None or st['state'] in ('Z', 'X'):
            return None         # the main process ended: the process watch says so
        if self.main != (main_pid, st['starttime']):
            self.main, self.ranks, self.scanned_at = (main_pid, st['starttime']), {}, None
        found = self.check()
        if found is None and (self.scanned_at is None or now - self.scanned_at >= self.scan_gap * 0.9):
            self.scanned_at = now
            found = self.scan(control_group)
        return found

    def check(self):
        """The first noted rank that ended, else None."""
        for pid, (title, start) in sorted(self.ranks.items()):
            st = stat_of(pid, self.root)
            if st is None or st['starttime'] != start:
                return death(title, pid, None, self.main[0])
            if not st['comm'].startswith(TITLE_PREFIX):
                del self.ranks[pid]     # it ran another program: a helper forked with a rank's title, no rank
                continue
            if st['state'] in ('Z', 'X'):
                if st['exit_status'] == 0:
                    del self.ranks[pid]
                    continue
                return death(title, pid, st['exit_status'], self.main[0])
        return None

    def scan(self, control_group):
        """Note the main process's ranks not noted yet; a rank that is a zombie already is a death."""
        main_pid = self.main[0]
        pids = unit_pids(control_group, self.croot)
        self.scan_gap = self.scan_every
        if pids is None or main_pid not in pids:
            pids = all_pids(self.root)
            self.scan_gap = self.full_scan_every
        stats = {}
        for pid in pids:
            st = stat_of(pid, self.root)
            if st is not None:
                stats[pid] = st
        for pid in sorted(stats):
            st = stats[pid]
            if pid in self.ranks or not st['comm'].startswith(TITLE_PREFIX) or not descends(pid, stats, main_pid):
                continue
            parent = stats.get(st['ppid'])
            if parent is not None and parent['comm'] == st['comm']:
                continue        # a rank's own child (a subprocess before its exec) carries the rank's title
            title = title_of(pid, st['comm'], self.root)
            if not is_rank(title):
                continue
            if st['state'] not in ('Z', 'X'):
                self.ranks[pid] = (title, st['starttime'])
            elif st['exit_status'] != 0:
                return death(title, pid, st['exit_status'], main_pid)
        return None
