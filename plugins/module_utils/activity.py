# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a silent server working? CPU time and bytes read by its processes, sampled while it loads.

SGLang writes nothing to the journal for long stretches of a healthy start: Python imports before its
first line, a weight load whose progress is a tqdm bar (``\\r``, no newline, so journald shows no line), a
first start's JIT compile. Silence alone is therefore no hang: a server is called ``hang`` only when it
is silent *and* idle, i.e. its processes neither use CPU, nor wait for it, nor read data.

A server starved of CPU by other work on its host (a busy loader that gets 2 % of a core among a hundred
runnable processes) is no hang either: its threads wait on a run queue, which the kernel counts in the
second field of ``/proc/PID/task/TID/schedstat`` (nanoseconds), and an idle server's threads sleep.

The readers take the unit's cgroup (``cpu.stat`` ``usage_usec``, ``io.stat`` ``rbytes``, and the threads of
the processes in ``cgroup.procs``) when systemd names one, else the process tree of the main PID from /proc
(utime + stime, ``rchar`` of /proc/PID/io, the threads' schedstat). Pure functions over text plus small
readers; no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmserve.sglang.plugins.module_utils._proctree import unit_pids
from ansible_collections.llmserve.sglang.plugins.module_utils.gpu_holders import parse_stat, read_text

# a server counts as working when, between two samples, it used at least this share of one CPU core ...
MIN_CPU_SHARE = 0.05
# ... or read at least this many bytes (weights from disk or page cache) ...
MIN_READ_BYTES = 1 << 20
# ... or its threads waited, together, at least this share of the time on a run queue (runnable, starved of CPU
# by other work; an idle server's threads sleep, and the few wake-ups of its timers wait milliseconds)
MIN_WAIT_SHARE = 0.5
# seconds between samples
SAMPLE_EVERY = 1.0
# idleness is told only after this many comparisons in a row without work: one quiet second of a busy
# process on a loaded machine (a scheduler that ran others) is no hang
IDLE_SAMPLES = 3


def parse_cpu_stat(text):
    """CPU seconds from a cgroup v2 ``cpu.stat`` (``usage_usec N``), or None."""
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == 'usage_usec':
            try:
                return int(parts[1]) / 1e6
            except ValueError:
                return None
    return None


def parse_io_stat(text):
    """Bytes read from a cgroup v2 ``io.stat`` (sum of ``rbytes=`` over devices); 0 when empty."""
    total = 0
    for line in (text or '').splitlines():
        for field in line.split()[1:]:
            key, _sep, value = field.partition('=')
            if key == 'rbytes':
                try:
                    total += int(value)
                except ValueError:
                    pass
    return total


def parse_proc_io(text):
    """``rchar`` (bytes read through any read call, page cache included) of /proc/PID/io, or 0."""
    for line in (text or '').splitlines():
        key, _sep, value = line.partition(':')
        if key.strip() == 'rchar':
            try:
                return int(value.strip())
            except ValueError:
                return 0
    return 0


def parse_schedstat(text):
    """Seconds a thread waited on a run queue: the second field of ``/proc/PID/task/TID/schedstat``
    (``<ns on the CPU> <ns waiting> <timeslices>``), or 0.0."""
    parts = (text or '').split()
    if len(parts) < 2:
        return 0.0
    try:
        return int(parts[1]) / 1e9
    except ValueError:
        return 0.0


def run_delay(pids, proc='/proc'):
    """Seconds the threads of ``pids`` waited on a run queue, summed (a thread that ended no longer counts)."""
    total = 0.0
    for pid in pids:
        task = os.path.join(proc, str(pid), 'task')
        try:
            tids = os.listdir(task)
        except OSError:
            continue
        for tid in tids:
            total += parse_schedstat(read_text(os.path.join(task, tid, 'schedstat')))
    return total


def cgroup_usage(control_group, root='/sys/fs/cgroup', proc='/proc'):
    """``(cpu_seconds, read_bytes, wait_seconds)`` of a cgroup v2 path as systemd names it
    (``/system.slice/x.service``), or None."""
    if not control_group:
        return None
    base = os.path.join(root, control_group.lstrip('/'))
    cpu = parse_cpu_stat(read_text(os.path.join(base, 'cpu.stat')))
    if cpu is None:
        return None
    waited = run_delay(unit_pids(control_group, croot=root) or [], proc=proc)
    return cpu, parse_io_stat(read_text(os.path.join(base, 'io.stat'))), waited


def tree_usage(pid, proc='/proc'):
    """``(cpu_seconds, read_bytes, wait_seconds)`` of ``pid`` and all its descendants, from /proc, or None when
    it is gone."""
    if not pid:
        return None
    stats = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        st = parse_stat(read_text(os.path.join(proc, name, 'stat')))
        if st is not None:
            stats[int(name)] = (st['ppid'], st['cpu_ticks'])
    if pid not in stats:
        return None
    children = {}
    for p, (ppid, _ticks) in stats.items():
        children.setdefault(ppid, []).append(p)
    ticks, rbytes, todo, seen = 0, 0, [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        ticks += stats[p][1]
        rbytes += parse_proc_io(read_text(os.path.join(proc, str(p), 'io')))
        todo.extend(children.get(p, ()))
    try:
        hz = float(os.sysconf('SC_CLK_TCK'))
    except (ValueError, OSError, AttributeError):
        hz = 100.0
    return ticks / hz, rbytes, run_delay(seen, proc=proc)


class Activity(object):
    """Samples a usage reader now and then and says whether the server worked since the last sample.

    ``read()`` returns ``(cpu_seconds, read_bytes[, wait_seconds])`` or None (unknown: then it never counts as
    working).
    """

    def __init__(self, read, min_cpu_share=MIN_CPU_SHARE, min_read_bytes=MIN_READ_BYTES, every=SAMPLE_EVERY,
                 idle_samples=IDLE_SAMPLES, min_wait_share=MIN_WAIT_SHARE):
        self.read = read
        self.min_cpu_share = min_cpu_share
        self.min_read_bytes = min_read_bytes
        self.min_wait_share = min_wait_share
        self.every = every
        self.idle_samples = idle_samples
        self.last = None        # (time, cpu, bytes, waited)
        self.last_busy = None   # time of the last sample that showed work
        self.idle_run = 0       # comparisons in a row that showed no work
        self.known = True       # False once the reader said it cannot tell

    def judged(self):
        """True once the server was seen idle ``idle_samples`` comparisons in a row, or when usage cannot be
        read at all (then silence alone decides)."""
        return self.idle_run >= self.idle_samples or not self.known

    def poll(self, now):
        """Sample when due; return True when the server used CPU or read data since the previous sample."""
        if self.last is not None and now - self.last[0] < self.every:
            return False
        try:
            sample = self.read()
        except Exception:  # pylint: disable=broad-except
            sample = None
        if sample is None:
            self.known = False
            return False
        cpu, rbytes = sample[0], sample[1]
        waited = sample[2] if len(sample) > 2 else 0.0
        prev, self.last = self.last, (now, cpu, rbytes, waited)
        if prev is None:
            return False
        dt = max(now - prev[0], 1e-6)
        busy = ((cpu - prev[1]) >= self.min_cpu_share * dt or (rbytes - prev[2]) >= self.min_read_bytes
                or (waited - prev[3]) >= self.min_wait_share * dt)
        if busy:
            self.last_busy = now
            self.idle_run = 0
        else:
            self.idle_run += 1
        return busy
