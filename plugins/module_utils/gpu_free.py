# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Free the GPUs: find the holders, end those that may be ended, wait until the memory is free. Bounded.

The procedure of the ``gpu_reset`` module, shared with ``sglang_launch`` (which frees the GPUs between the stop and
the start of a restart when asked to). Side effects come in as callables: ``run(argv) -> (rc, out, err)`` and
``bin_path(name, opt_dirs) -> path or None`` (AnsibleModule.run_command and get_bin_path in the modules).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_subset
from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi as nsmi

DEFAULTS = dict([(key, spec.get('default')) for key, spec in _specs.gpu_free_argument_spec().items()], vmid=None)


def bounds_error(params):
    """The message when a wait would not be bounded (timeout or stop_timeout not above 0, term_grace below 0)."""
    if params['timeout'] <= 0 or params['stop_timeout'] <= 0 or params['term_grace'] < 0:
        return 'timeout and stop_timeout must be more than 0 and term_grace 0 or more (every wait is bounded)'
    return None


class FreeError(Exception):
    """The GPUs could not be looked at (nvidia-smi missing or failing): msg, plus extra result keys."""

    def __init__(self, msg, **extra):
        super(FreeError, self).__init__(msg)
        self.msg = msg
        self.extra = extra


def find_nvidia_smi(name, bin_path):
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    return bin_path(name, ['/usr/bin', '/usr/local/bin'])


class Finder(object):
    """Who holds the GPUs: nvidia-smi compute apps, fuser on the device nodes (else a /proc fd scan)."""

    def __init__(self, run, bin_path, nvidia_smi='nvidia-smi', devices='/dev/nvidia*', fuser='fuser'):
        self.run, self.bin_path, self.devices, self.fuser = run, bin_path, devices, fuser
        self.nvidia_smi = find_nvidia_smi(nvidia_smi, bin_path)
        if not self.nvidia_smi:
            raise FreeError('nvidia_smi: %r was not found on this host; install the NVIDIA driver utilities, '
                            'or set the nvidia_smi option to the full path of nvidia-smi' % nvidia_smi)
        self.sources_used = []

    def smi(self, argv):
        rc, out, err = self.run(argv)
        if rc != 0:
            raise FreeError('%s failed (rc=%s): %s' % (' '.join(argv), rc, (err or out).strip()), rc=rc, stderr=err)
        return out

    def memory(self):
        return nsmi.parse_csv(self.smi(nsmi.query_gpu_argv(self.nvidia_smi, nsmi.MEMORY_FIELDS)), nsmi.MEMORY_FIELDS)

    def find(self):
        gpus = self.memory()
        apps = nsmi.parse_apps(self.smi(nsmi.query_apps_argv(self.nvidia_smi)), gpus)
        self.sources_used = ['nvidia-smi']
        paths = sorted(x for x in glob.glob(self.devices) if not os.path.isdir(x))
        fuser_rows = None
        fuser = self.bin_path(self.fuser, ['/usr/bin', '/bin', '/sbin', '/usr/sbin'])
        if fuser and paths:
            rc, out, err = self.run(gpu_holders.fuser_argv(paths, fuser))
            if rc in (0, 1):
                fuser_rows = gpu_holders.parse_fuser(out, err)
                self.sources_used.append('fuser')
        fd_scan = None
        if fuser_rows is None:
            fd_scan = gpu_holders.scan_proc_fds(pattern=gpu_holders.device_pattern(self.devices))
            self.sources_used.append('proc')
        pids = set(a['pid'] for a in apps if a.get('pid') is not None)
        pids.update(r['pid'] for r in fuser_rows or [])
        pids.update((fd_scan or {}).keys())
        infos = dict((pid, gpu_holders.proc_info(pid)) for pid in pids)
        holders = gpu_holders.merge_holders(apps, fuser_rows, fd_scan, infos)
        return gpus, holders


def describe(items):
    parts = []
    for h in items:
        vmid = ' (vmid %s)' % h['vmid'] if h.get('vmid') else ''
        why = ' [%s]' % h['why'] if h.get('why') else ''
        parts.append('pid %s %s%s%s' % (h['pid'], h.get('name'), vmid, why))
    return ', '.join(parts)


def free(run, bin_path, params, check_mode=False, warn=None, ops=None, own_unit=None):
    """End the GPU holders this host (or container ``vmid``) may end, then wait until the memory is free.

    ``params``: the gpu_reset options (DEFAULTS for what is missing). ``own_unit``: the service being cleaned up
    (``name.service``); with a subset (``gpus``) a holder in another system service is never ended. Returns ``(ok, result, msg)``: ``result`` has
    holders, killed, would_kill, spared, memory_before, memory_after, seconds, seconds_to_free, hard_reset_done,
    sources_used, changed; on failure also remaining and holders_after, and ``msg`` says what is still held and by
    whom. Raises FreeError when nvidia-smi cannot be run.
    """
    p = dict(DEFAULTS)
    p.update(dict((k, params[k]) for k in DEFAULTS if params.get(k) is not None))
    warn = warn or (lambda msg: None)
    ops = ops or gpu_holders.ProcOps()
    start = ops.now()
    deadline = start + float(p['timeout'])
    finder = Finder(run, bin_path, p['nvidia_smi'], p['devices'], p['fuser'])
    memory, holders = finder.find()
    memory_before = nsmi.memory_by_index(memory)
    subset = gpu_subset.resolve(p['gpus'], memory)
    if subset['errors']:
        raise FreeError('gpus: %s' % '; '.join(e.replace(gpu_subset.FIELD + ': ', '') for e in subset['errors']))
    p['gpus'] = None if subset['all'] else subset['indices']
    own_vmid = gpu_holders.vmid_from_cgroup(gpu_holders.read_text('/proc/self/cgroup'))
    kill, spared = gpu_holders.plan(
        holders, vmid=p['vmid'], own_vmid=own_vmid, protected_pids=p['protected_pids'],
        protected_names=p['protected_names'], self_pids=gpu_holders.ancestors(os.getpid()),
        container=gpu_holders.in_container(), default_protected=p['default_protected'])
    kill, outside, blocked = gpu_subset.split_holders(kill, p['gpus'], own_unit=own_unit)
    result = dict(changed=False, holders=holders, killed=[], would_kill=[], spared=spared + outside + blocked,
                  blocked=blocked, gpus=p['gpus'] or [m['index'] for m in memory_before],
                  memory_before=memory_before, memory_after=memory_before, seconds=0.0, seconds_to_free=None,
                  hard_reset_done=[], sources_used=finder.sources_used)
    if blocked:
        # a holder of this service's GPUs and of others: ending it would disturb the others; nothing is signalled
        result['seconds'] = round(ops.now() - start, 3)
        return False, result, gpu_subset.blocked_message(blocked, p['gpus'])
    for rec in holders:
        if rec.get('state') == 'D':
            warn('pid %s (%s) holds a GPU and is in D state (uninterruptible sleep)' % (rec['pid'], rec.get('name')))

    if check_mode:
        result['would_kill'] = kill
        result['changed'] = bool(kill)
        result['seconds'] = round(ops.now() - start, 3)
        return True, result, None

    t_signal = ops.now()
    killed, remaining = gpu_holders.terminate(kill, float(p['term_grace']), deadline, ops)
    result['killed'] = killed
    result['changed'] = bool(killed)

    def query():
        return nsmi.memory_by_index(finder.memory())

    ok, memory_after, dummy = gpu_holders.wait_memory(query, p['memory_threshold_mib'], deadline, ops, gpus=p['gpus'])
    if ok:
        result['seconds_to_free'] = round(ops.now() - t_signal, 3)
    elif p['hard_reset']:
        for item in gpu_holders.over_threshold(memory_after, p['memory_threshold_mib'], p['gpus']):
            rc, out, err = run(nsmi.gpu_reset_argv(item['index'], finder.nvidia_smi))
            if rc == 0:
                result['hard_reset_done'].append(item['index'])
            else:
                warn('nvidia-smi --gpu-reset -i %s failed: %s' % (item['index'], (err or out).strip()))
        result['changed'] = result['changed'] or bool(result['hard_reset_done'])
        ok, memory_after, dummy = gpu_holders.wait_memory(query, p['memory_threshold_mib'], ops.now() + 10, ops,
                                                          gpus=p['gpus'])
        if ok:
            result['seconds_to_free'] = round(ops.now() - t_signal, 3)
    result['memory_after'] = memory_after
    result['seconds'] = round(ops.now() - start, 3)
    if ok:
        return True, result, None
    still = gpu_holders.over_threshold(memory_after, p['memory_threshold_mib'], p['gpus'])
    dummy, holders_now = finder.find()
    result['holders_after'] = holders_now
    msg = ('GPU memory still held after %.1fs (timeout %s): %s (threshold %s MiB)'
           % (result['seconds'], p['timeout'],
              ', '.join('GPU %s %s MiB' % (m['index'], m['used_mib']) for m in still), p['memory_threshold_mib']))
    if remaining:
        msg += '; not ended by SIGTERM/SIGKILL: %s' % describe(remaining)
    if holders_now:
        msg += '; holders now: %s' % describe(holders_now)
    if spared:
        msg += '; spared: %s' % describe(spared)
    if not holders_now:
        msg += ('; no process is listed: memory held by a process outside this PID namespace (a container: '
                'run on the Proxmox node with vmid) or by the driver')
    result['remaining'] = remaining
    return False, result, msg
