# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who holds the GPUs, which of them may be killed, and the bounded kill / wait loops.

Sources of holders: ``nvidia-smi --query-compute-apps`` (node PIDs: the driver ignores PID
namespaces), ``fuser -v /dev/nvidia*`` and, as fallback, a scan of ``/proc/*/fd`` links.
On a Proxmox node a PID's container is read from ``/proc/<pid>/cgroup`` (``0::/lxc/<vmid>/...``).
Parsing and planning are pure; the /proc readers take the proc root as a parameter (tests use a
fake tree); the loops take their side effects as callables.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re
import signal
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd

LXC_CGROUP_RE = re.compile(r'^0::/lxc/(\d+)(?:/|$)', re.MULTILINE)
# a system service's processes: 0::/system.slice/NAME.service (inside a container seen from its node:
# 0::/lxc/129/ns/system.slice/NAME.service)
UNIT_CGROUP_RE = re.compile(r'^0::(?:/.*)?/system\.slice/([^/\n]+\.service)(?:/|$)', re.MULTILINE)
DEVICE_LINK_RE = re.compile(r'^/dev/nvidia')

# never killed, whatever holds: init, remote access, the NVIDIA daemons that keep device nodes open
DEFAULT_PROTECTED_NAMES = (
    'systemd', 'init', 'sshd', 'systemd-journal', 'systemd-logind', 'systemd-udevd', 'lxc-start', 'lxcfs',
    'nvidia-persistenced', 'nvidia-persistenc', 'nvidia-powerd', 'nv-hostengine', 'dcgm-exporter',
    'nvidia-smi', 'Xorg', 'Xwayland', 'gnome-shell',
)


# ---------------------------------------------------------------- parsing
def fuser_argv(paths, fuser='fuser'):
    return [fuser, '-v'] + list(paths)


_ACCESS_RE = re.compile(r'^[.cefFrmR]{2,6}$')


def _fuser_row(tokens):
    """Tokens after the device -> (user, pid or None, access, command) or None (kernel rows, noise)."""
    if len(tokens) >= 3 and tokens[1].isdigit() and _ACCESS_RE.match(tokens[2]):
        return tokens[0], int(tokens[1]), tokens[2], ' '.join(tokens[3:])
    if len(tokens) >= 2 and _ACCESS_RE.match(tokens[1]):
        return tokens[0], None, tokens[1], ' '.join(tokens[2:])
    return None


def parse_fuser(stdout, stderr=None):
    """``fuser -v`` output -> [{device, user, pid, access, command}].

    fuser writes the PIDs to stdout and everything else (file names, the table, ``Cannot stat`` noise)
    to stderr; a terminal shows them merged, as in the capture::

                             USER        PID ACCESS COMMAND
        /dev/nvidia0:        root        419 F...m python3
        /dev/nvidia-uvm:
                             root        419 F...m python3

    Pass both streams (``stderr`` given): the rows of stderr are paired, in order, with the PIDs of
    stdout. Pass one merged text (``stderr`` None): the PID is read from each row. ``kernel`` rows are
    skipped. Without ``-v`` only the PIDs are known (device None).
    """
    if stderr is None:
        merged, pids = stdout or '', None
    else:
        merged, pids = stderr or '', [int(x) for x in re.findall(r'\d+', stdout or '')]
    rows = []
    device = None
    for raw in merged.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.startswith('Cannot stat') or 'Permission denied' in line:
            continue
        stripped = line.strip()
        if stripped.split() == ['USER', 'PID', 'ACCESS', 'COMMAND']:
            continue
        rest = stripped
        if not line[0].isspace():
            match = re.match(r'^(/\S*?):(?:\s+(.*))?$', line)
            if not match:
                continue
            device = match.group(1)
            rest = (match.group(2) or '').strip()
            if not rest:
                continue
        tokens = rest.split()
        if len(tokens) > 1 and tokens[1] == 'kernel':
            continue
        row = _fuser_row(tokens)
        if row is not None:
            rows.append({'device': device, 'user': row[0], 'pid': row[1], 'access': row[2], 'command': row[3]})
        elif stderr is None:
            # merged, non-verbose: "419m 420c"
            for token in rest.split():
                digits = re.match(r'^(\d+)([a-zA-Z]*)$', token)
                if digits:
                    rows.append({'device': device, 'user': None, 'pid': int(digits.group(1)),
                                 'access': digits.group(2), 'command': ''})
    if pids is None:
        return [r for r in rows if r['pid'] is not None]
    unpaired = [r for r in rows if r['pid'] is None]
    if rows and not unpaired:
        return rows
    if unpaired and len(unpaired) == len(pids) and len(unpaired) == len(rows):
        for row, pid in zip(unpaired, pids):
            row['pid'] = pid
        return rows
    # no -v table, or one that does not line up: the PIDs alone are certain
    return [{'device': None, 'user': None, 'pid': pid, 'access': '', 'command': ''} for pid in pids]


def vmid_from_cgroup(text):
    """``/proc/<pid>/cgroup`` content -> the Proxmox vmid (int) or None. ``/lxc.monitor/<id>`` is not a CT process."""
    match = LXC_CGROUP_RE.search(text or '')
    return int(match.group(1)) if match else None


def unit_from_cgroup(text):
    """``/proc/<pid>/cgroup`` content -> the system service it runs in (``name.service``) or None."""
    match = UNIT_CGROUP_RE.search(text or '')
    return match.group(1) if match else None


def nspid_from_status(text):
    """``NSpid:`` of ``/proc/<pid>/status`` -> list of PIDs, outermost namespace first."""
    for line in (text or '').splitlines():
        if line.startswith('NSpid:'):
            return [int(x) for x in line.split()[1:] if x.isdigit()]
    return []


def parse_stat(text):
    """``/proc/<pid>/stat`` -> dict(comm, state, ppid, starttime, cpu_ticks). comm may contain spaces and parens.

    ``cpu_ticks``: utime + stime, in clock ticks."""
    if not text:
        return None
    left = text.find('(')
    right = text.rfind(')')
    if left < 0 or right < 0:
        return None
    fields = text[right + 2:].split()
    if len(fields) < 20:
        return None
    return {'comm': text[left + 1:right], 'state': fields[0], 'ppid': int(fields[1]), 'starttime': int(fields[19]),
            'cpu_ticks': int(fields[11]) + int(fields[12])}


# ---------------------------------------------------------------- /proc readers
def read_text(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def proc_info(pid, proc='/proc'):
    """What /proc says about a pid, or None when it is not visible (gone, or another PID namespace)."""
    base = os.path.join(proc, str(pid))
    stat = parse_stat(read_text(os.path.join(base, 'stat')))
    if stat is None:
        return None
    cmdline = read_text(os.path.join(base, 'cmdline')) or ''
    cgroup = read_text(os.path.join(base, 'cgroup')) or ''
    status = read_text(os.path.join(base, 'status')) or ''
    return {
        'pid': int(pid), 'name': stat['comm'], 'state': stat['state'], 'ppid': stat['ppid'],
        'starttime': stat['starttime'], 'cmdline': ' '.join(x for x in cmdline.split('\x00') if x),
        'vmid': vmid_from_cgroup(cgroup), 'unit': unit_from_cgroup(cgroup), 'nspid': nspid_from_status(status),
    }


def device_pattern(glob_pattern):
    """Compiled regex for fd link targets from a shell glob such as ``/dev/nvidia*``."""
    return re.compile(fnmatch.translate(glob_pattern))


def scan_proc_fds(proc='/proc', pattern=DEVICE_LINK_RE):
    """{pid: sorted device paths} for every process with an fd on a matching device (fallback of fuser)."""
    found = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        fd_dir = os.path.join(proc, entry, 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        devices = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if pattern.match(target):
                devices.add(target)
        if devices:
            found[int(entry)] = sorted(devices)
    return found


def ancestors(pid, proc='/proc'):
    """pid and its parents up to 1 (this module and whoever started it: never killed)."""
    chain = set()
    current = pid
    while current and current not in chain:
        chain.add(current)
        stat = parse_stat(read_text(os.path.join(proc, str(current), 'stat')))
        if stat is None:
            break
        current = stat['ppid']
    return chain


def in_container(proc='/proc', run='/run'):
    """True inside an LXC/other container (systemd's /run/systemd/container, or init's environment)."""
    if os.path.exists(os.path.join(run, 'systemd', 'container')):
        return True
    environ = read_text(os.path.join(proc, '1', 'environ')) or ''
    return any(x.startswith('container=') for x in environ.split('\x00'))


# ---------------------------------------------------------------- merging and planning
def merge_holders(apps=None, fuser_rows=None, fd_scan=None, infos=None):
    """One record per pid: {pid, name, sources, devices, gpus, used_mib, vmid, state, cmdline, visible}.

    apps: parsed compute apps (pid, name, used_mib, gpu_index); fuser_rows: parse_fuser();
    fd_scan: scan_proc_fds(); infos: {pid: proc_info() or None}.
    """
    holders = {}
    infos = infos or {}

    def entry(pid):
        if pid not in holders:
            holders[pid] = {'pid': pid, 'name': None, 'sources': [], 'devices': [], 'gpus': [], 'used_mib': 0}
        return holders[pid]

    for app in apps or []:
        if app.get('pid') is None:
            continue
        rec = entry(app['pid'])
        if 'nvidia-smi' not in rec['sources']:
            rec['sources'].append('nvidia-smi')
        rec['name'] = rec['name'] or app.get('name')
        rec['used_mib'] += app.get('used_mib') or 0
        if app.get('gpu_index') is not None and app['gpu_index'] not in rec['gpus']:
            rec['gpus'].append(app['gpu_index'])
    for row in fuser_rows or []:
        rec = entry(row['pid'])
        if 'fuser' not in rec['sources']:
            rec['sources'].append('fuser')
        if row.get('device') and row['device'] not in rec['devices']:
            rec['devices'].append(row['device'])
        rec['name'] = rec['name'] or row.get('command') or None
    for pid, devices in (fd_scan or {}).items():
        rec = entry(pid)
        if 'proc' not in rec['sources']:
            rec['sources'].append('proc')
        for device in devices:
            if device not in rec['devices']:
                rec['devices'].append(device)
    out = []
    for pid in sorted(holders):
        rec = holders[pid]
        info = infos.get(pid)
        rec['visible'] = info is not None
        if info:
            rec['name'] = info['name']
            rec['state'] = info['state']
            rec['vmid'] = info['vmid']
            rec['cmdline'] = info['cmdline']
            rec['starttime'] = info['starttime']
            rec['nspid'] = info.get('nspid') or []
            rec['unit'] = info.get('unit')
        else:
            rec.update(state=None, vmid=None, cmdline=None, starttime=None, nspid=[], unit=None)
        if not rec['devices']:
            rec['devices'] = ['/dev/nvidia%d' % index for index in rec['gpus']]
        rec['devices'].sort()
        rec['gpus'].sort()
        out.append(rec)
    return out


def plan(holders, vmid=None, own_vmid=None, protected_pids=(), protected_names=(), self_pids=(),
         container=False, default_protected=True):
    """-> (kill, spared). Pure. spared items carry ``why``.

    vmid set (run on the Proxmox node): only processes of that container.
    vmid unset: only processes of this host (same cgroup container as this module: ``own_vmid``).
    """
    names = set(protected_names or ())
    if default_protected:
        names.update(DEFAULT_PROTECTED_NAMES)
    kill = []
    spared = []
    for rec in holders:
        pid = rec['pid']
        why = None
        if not rec.get('visible', True):
            why = ('not visible in this PID namespace (nvidia-smi reports node PIDs; run on the node with vmid, '
                   'or it has exited)')
        elif pid == 1:
            why = 'pid 1 is never killed'
        elif pid in self_pids:
            why = 'this module or one of its parents'
        elif pid in (protected_pids or ()):
            why = 'in protected_pids'
        elif rec.get('name') in names:
            why = 'protected name %s' % rec.get('name')
        elif vmid is not None and rec.get('vmid') != vmid:
            owner = 'the node' if rec.get('vmid') is None else 'container %s' % rec.get('vmid')
            why = 'belongs to %s, not to container %s' % (owner, vmid)
        elif vmid is None and rec.get('vmid') != own_vmid:
            if rec.get('vmid') is None:
                why = 'belongs to the node, not to container %s (this host)' % own_vmid
            else:
                why = 'belongs to container %s (set vmid=%s to clean it up from the node)' % (rec['vmid'], rec['vmid'])
        elif container and rec.get('sources') == ['nvidia-smi']:
            why = 'listed by nvidia-smi only: inside a container its PIDs are node PIDs, not ours'
        elif rec.get('state') == 'Z':
            why = 'zombie: already dead, its parent has not reaped it (it holds no GPU memory)'
        if why:
            item = dict(rec)
            item['why'] = why
            spared.append(item)
        else:
            kill.append(rec)
    return kill, spared


# ---------------------------------------------------------------- loops (side effects injected)
class ProcOps(object):
    """The real side effects; tests pass a fake with the same methods."""

    def __init__(self, proc='/proc'):
        self.proc = proc

    def alive(self, pid, starttime=None):
        """Alive and the same process (start time unchanged); a zombie counts as gone."""
        stat = parse_stat(read_text(os.path.join(self.proc, str(pid), 'stat')))
        if stat is None or stat['state'] in ('Z', 'X', 'x'):
            return False
        if starttime is not None and stat['starttime'] != starttime:
            return False
        return True

    def state(self, pid):
        stat = parse_stat(read_text(os.path.join(self.proc, str(pid), 'stat')))
        return stat['state'] if stat else None

    def kill(self, pid, sig):
        try:
            os.kill(pid, sig)
        except OSError:
            return False
        return True

    def sleep(self, seconds):
        time.sleep(seconds)

    def now(self):
        return time.time() if not hasattr(time, 'monotonic') else time.monotonic()


def terminate(targets, term_grace, deadline, ops, poll=0.05):
    """SIGTERM all, poll until gone or term_grace, SIGKILL the rest, poll until gone or deadline.

    targets: holder records (pid, name, vmid, starttime). -> (killed, remaining); killed items
    carry ``signal`` (the one that ended it) and ``seconds``. A target that was already gone is skipped.
    """
    start = ops.now()
    killed = []
    pending = []
    for rec in targets:
        if not ops.alive(rec['pid'], rec.get('starttime')):
            continue
        if ops.kill(rec['pid'], signal.SIGTERM):
            pending.append(rec)
    sent = dict((rec['pid'], 'SIGTERM') for rec in pending)
    grace_end = min(start + term_grace, deadline)

    def reap(until):
        while pending:
            for rec in list(pending):
                if not ops.alive(rec['pid'], rec.get('starttime')):
                    pending.remove(rec)
                    killed.append({'pid': rec['pid'], 'name': rec.get('name'), 'vmid': rec.get('vmid'),
                                   'signal': sent[rec['pid']], 'seconds': round(ops.now() - start, 3)})
            if not pending or ops.now() >= until:
                break
            ops.sleep(poll)

    reap(grace_end)
    if pending:
        for rec in pending:
            if ops.kill(rec['pid'], signal.SIGKILL):
                sent[rec['pid']] = 'SIGKILL'
        reap(deadline)
    remaining = []
    for rec in pending:
        item = dict(rec)
        item['state'] = ops.state(rec['pid'])
        item['signal'] = sent.get(rec['pid'])
        if item['state'] == 'D':
            item['why'] = 'in uninterruptible sleep (D state: stuck in the driver or I/O); SIGKILL acts when it wakes'
        else:
            item['why'] = 'still alive after %s' % sent.get(rec['pid'])
        remaining.append(item)
    return killed, remaining


def over_threshold(memory, threshold_mib, gpus=None):
    """memory: [{index, used_mib}] -> the entries at or over the threshold (only ``gpus`` when given)."""
    out = []
    for item in memory:
        if gpus and item.get('index') not in gpus:
            continue
        if item.get('used_mib') is not None and item['used_mib'] >= threshold_mib:
            out.append(item)
    return out


def wait_memory(query, threshold_mib, deadline, ops, gpus=None, poll=0.1):
    """Poll ``query()`` (-> [{index, used_mib}]) until every GPU is under the threshold or the deadline.

    -> (ok, last_memory, seconds).
    """
    start = ops.now()
    while True:
        memory = query()
        if not over_threshold(memory, threshold_mib, gpus):
            return True, memory, round(ops.now() - start, 3)
        if ops.now() >= deadline:
            return False, memory, round(ops.now() - start, 3)
        ops.sleep(poll)


# ---------------------------------------------------------------- stopping a unit, bounded
ACTIVE_STATES = ('active', 'activating', 'deactivating', 'reloading', 'refreshing')


def stop_unit(run, unit, timeout, vmid=None, check_mode=False, now=None, kill=False):
    """Stop a systemd unit, bounded: ``systemctl stop`` for at most ``timeout`` seconds, then SIGKILL to the unit.

    ``run(argv) -> (rc, stdout, stderr)``. With ``vmid`` (on a Proxmox VE node) every command runs in that container
    through ``pct exec VMID --``. A unit that is not loaded or not running is left alone. When the stop does not end in
    time, the stop job goes on in systemd and ``systemctl kill --signal=SIGKILL`` ends what the unit still runs.
    With ``kill`` (a unit whose server already failed: nothing to drain, and SGLang's own clean-up after a crash
    ignores SIGTERM for up to a minute) ``systemctl kill --signal=SIGKILL`` comes first, then the bounded stop.
    Returns {unit, before, result, seconds}: result ``not_loaded``, ``not_active``, ``stopped``, ``killed`` (the stop
    timed out, or ``kill``) or ``would_stop`` (check mode). Raises RuntimeError naming the command when systemctl fails.
    """
    if now is None:
        now = time.monotonic
    prefix = ['pct', 'exec', str(vmid), '--'] if vmid else []
    t0 = now()

    def call(argv, ok=(0,)):
        rc, out, err = run(prefix + argv)
        if rc not in ok:
            raise RuntimeError('%s failed (rc %s): %s' % (' '.join(prefix + argv), rc, (err or out or '').strip()))
        return rc, out

    dummy, out = call(_systemd.show_argv(unit, ('LoadState', 'ActiveState')))
    props = _systemd.parse_show(out)
    before = props.get('ActiveState', '')
    result = {'unit': unit, 'before': before, 'result': 'stopped', 'seconds': 0.0}
    if props.get('LoadState') == 'not-found':
        result['result'] = 'not_loaded'
    elif before not in ACTIVE_STATES:
        result['result'] = 'not_active'
    elif check_mode:
        result['result'] = 'would_stop'
    else:
        if kill:
            call(['systemctl', 'kill', '--signal=SIGKILL', unit], ok=(0, 1))  # 1: nothing was left to kill
            result['result'] = 'killed'
        rc, dummy = call(['timeout', '%g' % float(timeout), 'systemctl', 'stop', unit], ok=(0, 124))
        if rc == 124:
            call(['systemctl', 'kill', '--signal=SIGKILL', unit], ok=(0, 1))  # 1: nothing was left to kill
            result['result'] = 'killed'
    result['seconds'] = round(now() - t0, 3)
    return result
