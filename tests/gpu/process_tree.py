#!/usr/bin/env python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An SGLang-shaped CUDA process tree, and how fast its GPU memory comes free (needs PyTorch and an NVIDIA GPU).

``tree``: the main process (imports torch, runs no kernel of its own), spawned with multiprocessing's *spawn*
like SGLang: a resource tracker, ``--gpu-children`` schedulers (each one a CUDA context holding ``--gib`` GiB,
comm ``sglang::schedul``) and ``--cpu-children`` detokenizers (no CUDA, comm ``sglang::detoken``). The children set
PR_SET_PDEATHSIG=SIGKILL (SGLang's kill_itself_when_parent_died). The main process reaps its children; when a
scheduler dies it ends the rest after ``--watchdog-delay`` s (SGLang: about 7 s); on SIGTERM it waits up to
``--drain-seconds`` for the schedulers, then SIGKILLs its children and exits 0 (SGLang's drain and
kill_process_tree). With ``--stage-dir`` it stops at each stage (before/after ``import torch``, children
ready, ``torch.cuda.is_available()``, ``torch.cuda.init()``, a first tensor on the GPU) until the driver says go.

``measure``: the driver. Starts trees, signals them (``term-tree``: SIGTERM to every process of the tree at
once, as systemd does to a unit's cgroup; ``kill-tree``: SIGKILL to all) or ends them with the collection's
``gpu_reset`` module run by ``ansible`` (``gr-term``: the schedulers exit on SIGTERM; ``gr-kill``: they ignore
it, SIGKILL after ``term_grace``), while it polls ``nvidia-smi --query-gpu=memory.used`` every 50 ms (and NVML
every 5 ms when pynvml is importable) and /proc every 5 ms. Writes ``process-tree.json`` under ``--out`` and prints
a transcript. It only ever signals the trees it started: before each real gpu_reset a check-mode run must select
processes of that tree and nothing else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import ctypes
import glob
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time

STAGES = (
    (0, 'started, torch not imported'),
    (1, 'import torch done (no CUDA call)'),
    (2, 'children hold their GPU memory; main has made no CUDA call'),
    (3, 'torch.cuda.is_available() called'),
    (4, 'torch.cuda.init() called'),
    (5, 'a first tensor on the GPU (torch.zeros(1, device=...))'),
)


# ---------------------------------------------------------------------------------------------- small helpers
def now():
    return time.time()


def write_json(path, data):
    tmp = path + '.tmp'
    with open(tmp, 'w') as handle:
        json.dump(data, handle)
    os.rename(tmp, path)


def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def prctl(option, value):
    try:
        libc = ctypes.CDLL('libc.so.6', use_errno=True)
        return libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return -1


def set_pdeathsig():
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def set_comm(name):
    try:
        with open('/proc/self/comm', 'w') as handle:
            handle.write(name[:15])
    except (IOError, OSError):
        pass


def proc_stat(pid):
    """-> (state, ppid, comm) or None."""
    text = read_text('/proc/%d/stat' % pid)
    if not text:
        return None
    right = text.rfind(')')
    comm = text[text.find('(') + 1:right]
    fields = text[right + 2:].split()
    return fields[0], int(fields[1]), comm


def gone(pid):
    stat = proc_stat(pid)
    return stat is None or stat[0] in ('Z', 'X', 'x')


def descendants(root):
    """root and every process below it (from /proc/*/stat)."""
    children = {}
    for path in glob.glob('/proc/[0-9]*/stat'):
        stat = proc_stat(int(path.split('/')[2]))
        if stat:
            children.setdefault(stat[1], []).append(int(path.split('/')[2]))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def device_use(pid, dev_glob):
    """What a process holds of the device nodes: open fds and mappings."""
    pattern = re.compile('^' + re.escape(dev_glob).replace('\\*', '.*') + '$')
    fds = []
    for fd in glob.glob('/proc/%d/fd/*' % pid):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if pattern.match(target):
            fds.append(target)
    maps = set()
    for line in (read_text('/proc/%d/maps' % pid) or '').splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and pattern.match(parts[5].strip()):
            maps.add(parts[5].strip())
    return {'fds': sorted(fds), 'maps': sorted(maps)}


def run(argv, timeout=60, env=None):
    t0 = now()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err, now() - t0


# ---------------------------------------------------------------------------------------------- the tree
def _on_term_factory(term_file, mode):
    def handler(signum, frame):
        with open(term_file, 'a') as handle:
            handle.write('%.6f\n' % now())
        if mode == 'exit':
            sys.exit(0)
    return handler


def _child_common(role, rank, term, ready_dir, comm):
    set_pdeathsig()
    set_comm(comm)
    term_file = os.path.join(ready_dir, '%s%d.term' % (role, rank))
    if term in ('exit', 'ignore'):
        signal.signal(signal.SIGTERM, _on_term_factory(term_file, term))
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def scheduler_main(rank, nbytes, device, term, ready_dir, backend, max_seconds):
    _child_common('scheduler', rank, term, ready_dir, 'sglang::schedul')
    t0 = now()
    if backend == 'fakegpu':
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lab', 'fakes'))
        import fakegpu  # pylint: disable=import-error

        block = fakegpu.hold({int(device.split(':')[-1]): nbytes >> 20}, name='sglang::schedul')
    else:
        import torch  # pylint: disable=import-error

        block = torch.empty(nbytes, dtype=torch.uint8, device=device)
        block.fill_(1)
        torch.cuda.synchronize(device)
    write_json(os.path.join(ready_dir, 'scheduler%d.json' % rank),
               {'pid': os.getpid(), 'role': 'scheduler', 'rank': rank, 'bytes': nbytes, 't_start': t0, 't_ready': now()})
    end = now() + max_seconds
    while now() < end:
        time.sleep(0.2)
    del block


def detokenizer_main(rank, term, ready_dir, backend, max_seconds):
    _child_common('detokenizer', rank, term, ready_dir, 'sglang::detoken')
    if backend == 'torch':
        import torch  # noqa: F401 pylint: disable=import-error,unused-import
    write_json(os.path.join(ready_dir, 'detokenizer%d.json' % rank),
               {'pid': os.getpid(), 'role': 'detokenizer', 'rank': rank, 't_ready': now()})
    end = now() + max_seconds
    while now() < end:
        time.sleep(0.2)


def tree_main(args):
    import multiprocessing

    ready_dir = args.ready_file + '.d'
    if not os.path.isdir(ready_dir):
        os.makedirs(ready_dir)
    main_log = {'pid': os.getpid(), 'stages': {}}

    def stage(number):
        main_log['stages'][str(number)] = now()
        if not args.stage_dir:
            return
        write_json(os.path.join(args.stage_dir, 'stage-%d.json' % number), {'pid': os.getpid(), 't': now()})
        go = os.path.join(args.stage_dir, 'go-%d' % number)
        end = now() + 120
        while not os.path.exists(go) and now() < end:
            time.sleep(0.02)

    stage(0)
    torch = None
    if args.backend == 'torch':
        import torch  # pylint: disable=import-error
    stage(1)
    ctx = multiprocessing.get_context('spawn')
    lock = ctx.Lock()  # a semaphore: starts multiprocessing's resource tracker, as in SGLang's tree
    nbytes = int(args.gib * (1 << 30))
    procs = []
    for rank in range(args.gpu_children):
        proc = ctx.Process(target=scheduler_main, name='scheduler_%d' % rank,
                           args=(rank, nbytes, args.device, args.child_term, ready_dir, args.backend,
                                 args.max_seconds))
        proc.start()
        procs.append(('scheduler', rank, proc))
    for rank in range(args.cpu_children):
        proc = ctx.Process(target=detokenizer_main, name='detokenizer_%d' % rank,
                           args=(rank, args.child_term, ready_dir, args.backend, args.max_seconds))
        proc.start()
        procs.append(('detokenizer', rank, proc))
    end = now() + 240
    while now() < end:
        if all(os.path.exists(os.path.join(ready_dir, '%s%d.json' % (role, rank))) for role, rank, proc in procs):
            break
        if any(not proc.is_alive() for role, rank, proc in procs):
            sys.stderr.write('a child died during start\n')
            break
        time.sleep(0.05)
    stage(2)
    if args.stage_dir:
        fake_block = None
        if torch is not None:
            main_log['is_available'] = torch.cuda.is_available()
        stage(3)
        if torch is not None:
            torch.cuda.init()
        stage(4)
        if torch is not None:
            fake_block = torch.zeros(1, device=args.device)
            torch.cuda.synchronize(args.device)
        else:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lab', 'fakes'))
            import fakegpu  # pylint: disable=import-error

            fake_block = fakegpu.hold({int(args.device.split(':')[-1]): 500}, name='python3')
        stage(5)
        main_log['main_tensor'] = repr(type(fake_block))

    children = []
    for role, rank, proc in procs:
        info = read_json(os.path.join(ready_dir, '%s%d.json' % (role, rank))) or {}
        children.append({'pid': proc.pid, 'role': role, 'rank': rank, 'ready': bool(info), 't_ready': info.get('t_ready')})
    main_log.update({'children': children, 't_ready': now(), 'lock': repr(lock)})
    write_json(args.ready_file, main_log)

    state = {'term': None}

    def on_term(signum, frame):
        state['term'] = now()
        with open(args.ready_file + '.main.term', 'a') as handle:
            handle.write('%.6f\n' % state['term'])

    signal.signal(signal.SIGTERM, on_term)

    def end_tree(why):
        for role, rank, proc in procs:
            if proc.is_alive():
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        for role, rank, proc in procs:
            proc.join(5)
        with open(args.ready_file + '.main.exit', 'w') as handle:
            json.dump({'t': now(), 'why': why}, handle)
        os._exit(0)  # pylint: disable=protected-access

    end = now() + args.max_seconds
    dead_since = None
    while now() < end:
        schedulers_alive = [proc for role, rank, proc in procs if role == 'scheduler' and proc.is_alive()]
        if state['term'] is not None:
            if not schedulers_alive or now() - state['term'] >= args.drain_seconds:
                end_tree('SIGTERM')
        elif len(schedulers_alive) < args.gpu_children:
            dead_since = dead_since or now()
            if now() - dead_since >= args.watchdog_delay:
                end_tree('a scheduler died')
        time.sleep(0.02)
    end_tree('max-seconds')


# ---------------------------------------------------------------------------------------------- measuring
class MemoryPoller(threading.Thread):
    """memory.used of one GPU: nvidia-smi every ``period`` s, or NVML (pynvml) every ``period`` s."""

    def __init__(self, kind, index, period, nvidia_smi='nvidia-smi'):
        super(MemoryPoller, self).__init__()
        self.daemon = True
        self.kind, self.index, self.period, self.nvidia_smi = kind, index, period, nvidia_smi
        self.samples = []  # (t_before, t_after, used_mib)
        self.stop_flag = threading.Event()
        self.error = None
        self.handle = None
        if kind == 'nvml':
            import pynvml  # pylint: disable=import-error

            self.nvml = pynvml
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def read(self):
        if self.kind == 'nvml':
            return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / float(1 << 20)
        rc, out, err, dummy = run([self.nvidia_smi, '--query-gpu=memory.used', '--format=csv,noheader,nounits',
                                   '-i', str(self.index)], timeout=10)
        if rc != 0:
            raise RuntimeError('nvidia-smi rc=%s: %s' % (rc, err.strip()))
        return float(out.strip().splitlines()[0])

    def run(self):
        while not self.stop_flag.is_set():
            t0 = now()
            try:
                value = self.read()
            except Exception as exc:  # pylint: disable=broad-except
                self.error = str(exc)
                return
            t1 = now()
            self.samples.append((t0, t1, value))
            delay = self.period - (now() - t0)
            if delay > 0:
                self.stop_flag.wait(delay)

    def stop(self):
        self.stop_flag.set()
        self.join(15)


class ExitWatcher(threading.Thread):
    """When each PID is gone (or a zombie), polling /proc every 5 ms."""

    def __init__(self, pids):
        super(ExitWatcher, self).__init__()
        self.daemon = True
        self.pids = list(pids)
        self.gone = {}
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set() and len(self.gone) < len(self.pids):
            for pid in self.pids:
                if pid not in self.gone and gone(pid):
                    self.gone[pid] = now()
            self.stop_flag.wait(0.005)

    def stop(self):
        self.stop_flag.set()
        self.join(5)


def crossing(samples, t_ref, below):
    """First sample (after t_ref) whose value is below ``below``: -> {first_seen_s, last_held_s, polls} or None.

    first_seen_s: end of the first free sample minus t_ref (an upper bound of when it came free);
    last_held_s: start of the last sample before it that was not free (a lower bound; 0 when that one started
    before t_ref)."""
    prev = None
    for t0, t1, value in samples:
        if t1 < t_ref:
            prev = (t0, t1, value)
            continue
        if value < below:
            return {'first_seen_s': round(t1 - t_ref, 4),
                    'last_held_s': round(max(0.0, (prev[0] if prev else t0) - t_ref), 4),
                    'value_mib': round(value, 1)}
        prev = (t0, t1, value)
    return None


def thin(samples, t_ref):
    """Samples relative to t_ref, only where the value changes (and the one before each change)."""
    out = []
    last = None
    for i, (t0, t1, value) in enumerate(samples):
        nxt = samples[i + 1][2] if i + 1 < len(samples) else None
        if last is None or value != last or nxt != value or i == len(samples) - 1:
            out.append([round(t0 - t_ref, 4), round(t1 - t_ref, 4), round(value, 1)])
        last = value
    return out


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else round((values[mid - 1] + values[mid]) / 2.0, 4)


class Driver(object):
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.t_start = now()
        self.cycles = []
        self.log_lines = []
        self.has_nvml = False
        if args.backend == 'torch':
            try:
                import pynvml  # noqa: F401 pylint: disable=import-error,unused-import

                self.has_nvml = True
            except ImportError:
                pass

    def say(self, msg):
        line = '[%7.2f] %s' % (now() - self.t_start, msg)
        print(line)
        sys.stdout.flush()

    # -------------------------------------------------------------- GPU reads
    def memory_used(self):
        rc, out, err, dummy = run([self.args.nvidia_smi, '--query-gpu=memory.used', '--format=csv,noheader,nounits',
                                   '-i', str(self.args.index)])
        return float(out.strip().splitlines()[0]) if rc == 0 else None

    def compute_apps(self):
        rc, out, err, dummy = run([self.args.nvidia_smi, '--query-compute-apps=pid,process_name,used_memory',
                                   '--format=csv,noheader,nounits'])
        rows = []
        for line in out.strip().splitlines() if rc == 0 else []:
            parts = [p.strip() for p in line.split(',')]
            if len(parts) == 3 and parts[0].isdigit():
                rows.append({'pid': int(parts[0]), 'name': parts[1], 'used_mib': parts[2]})
        return rows

    def fuser_pids(self):
        paths = sorted(p for p in glob.glob(self.args.devices) if not os.path.isdir(p))
        if not paths:
            return None
        rc, out, err, dummy = run(['fuser', '-v'] + paths)
        if rc not in (0, 1):
            return None
        return sorted(set(int(m) for m in re.findall(r'(\d+)', out)))

    # -------------------------------------------------------------- gpu_reset through ansible
    def gpu_reset(self, params, check):
        argv = [self.args.ansible, 'localhost', '-i', 'localhost,', '-c', 'local', '-m', 'llmserve.sglang.gpu_reset',
                '-a', json.dumps(params), '-e', 'ansible_python_interpreter=%s' % sys.executable]
        if check:
            argv.append('--check')
        # ad-hoc output through ansible-core's own 'minimal' callback: "localhost | STATUS => {json}"
        env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS='0', ANSIBLE_CALLBACK_RESULT_FORMAT='json',
                   ANSIBLE_NOCOLOR='1', ANSIBLE_DEPRECATION_WARNINGS='0')
        t0 = now()
        rc, out, err, dummy = run(argv, timeout=120, env=env)
        t1 = now()
        result = None
        if '=>' in out:
            try:
                result = json.JSONDecoder().raw_decode(out[out.find('=>') + 2:].lstrip())[0]
            except ValueError:
                pass
        if result is None:
            self.say('gpu_reset: no result (rc %s): %s %s' % (rc, out[-2000:], err[-2000:]))
        return {'rc': rc, 't_call': t0, 't_return': t1, 'result': result, 'stderr': err[-1000:]}

    # -------------------------------------------------------------- one tree
    def start_tree(self, name, child_term, gib, stage_dir=None):
        ready = os.path.join(self.out, 'trees', name + '.json')
        argv = [sys.executable, os.path.join(self.here, 'process_tree.py'), 'tree', '--ready-file', ready,
                '--gpu-children', str(self.args.gpu_children), '--cpu-children', '1', '--gib', str(gib),
                '--device', 'cuda:%d' % self.args.index, '--child-term', child_term, '--backend', self.args.backend,
                '--drain-seconds', str(self.args.drain_seconds), '--watchdog-delay', str(self.args.watchdog_delay),
                '--max-seconds', str(self.args.tree_max_seconds)]
        if stage_dir:
            argv += ['--stage-dir', stage_dir]
        t0 = now()
        proc = subprocess.Popen(argv)
        return proc, ready, t0

    def wait_ready(self, proc, ready, timeout=240):
        end = now() + timeout
        while now() < end:
            info = read_json(ready)
            if info:
                return info
            if proc.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def tree_roles(self, info):
        pids = descendants(info['pid'])
        roles = {info['pid']: 'main'}
        for child in info['children']:
            roles[child['pid']] = child['role']
        out = []
        for pid in pids:
            stat = proc_stat(pid)
            out.append({'pid': pid, 'role': roles.get(pid, 'resource_tracker' if stat and 'python' in stat[2] else 'other'),
                        'comm': stat[2] if stat else None})
        return out

    def term_times(self, ready):
        times = {}
        for path in glob.glob(ready + '.d/*.term'):
            text = read_text(path) or ''
            if text.strip():
                times[os.path.basename(path)[:-5]] = float(text.split()[0])
        text = read_text(ready + '.main.term')
        if text and text.strip():
            times['main'] = float(text.split()[0])
        return times

    def cleanup(self, proc, tree):
        """SIGKILL whatever of the tree is still alive (only PIDs of this tree), reap the main process."""
        left = [p['pid'] for p in tree if not gone(p['pid'])]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        return left

    def wait_idle(self, baseline, timeout=30):
        end = now() + timeout
        while now() < end:
            used = self.memory_used()
            if used is not None and used <= baseline + 64:
                return used
            time.sleep(0.1)
        return self.memory_used()

    def cycle(self, mode, rep, gib, probe=False):
        name = '%s-%d-%dg' % (mode, rep, int(gib))
        child_term = {'term-tree-default': 'default', 'term-tree-exit': 'exit', 'kill-tree': 'default',
                      'gr-term': 'exit', 'gr-kill': 'ignore'}[mode]
        baseline = self.wait_idle(self.memory_used() or 0.0)
        stage_dir = None
        if probe:
            stage_dir = os.path.join(self.out, 'trees', name + '.stages')
            os.makedirs(stage_dir)
        proc, ready, t_launch = self.start_tree(name, child_term, gib, stage_dir)
        rec = {'name': name, 'mode': mode, 'rep': rep, 'gib_per_scheduler': gib, 'schedulers': self.args.gpu_children,
               'baseline_mib': baseline, 'probe': probe}
        if probe:
            rec['stages'] = self.probe_stages(proc, stage_dir)
        info = self.wait_ready(proc, ready)
        if not info or not all(c['ready'] for c in info['children']):
            self.say('%s: the tree did not start (%s)' % (name, info))
            rec['error'] = 'tree did not start'
            self.cleanup(proc, self.tree_roles(info) if info else [])
            self.cycles.append(rec)
            return rec
        tree = self.tree_roles(info)
        rec['tree'] = tree
        rec['start_s'] = round(info['t_ready'] - t_launch, 3)
        time.sleep(0.3)
        rec['busy_mib'] = self.memory_used()
        if rep == 0 or probe:
            rec['compute_apps'] = self.compute_apps()
            fus = self.fuser_pids()
            rec['fuser_tree_pids'] = None if fus is None else [p for p in fus if p in [t['pid'] for t in tree]]
            rec['device_use'] = dict((str(t['pid']), device_use(t['pid'], self.args.devices)) for t in tree)

        smi = MemoryPoller('smi', self.args.index, 0.05, self.args.nvidia_smi)
        pollers = [smi]
        if self.has_nvml:
            pollers.append(MemoryPoller('nvml', self.args.index, 0.005))
        watcher = ExitWatcher([t['pid'] for t in tree])
        gr = None
        if mode.startswith('gr-'):
            check = self.gpu_reset(self.reset_params(mode, []), check=True)
            rec['gpu_reset_check'] = self.short_result(check)
            res = check['result'] or {}
            tree_pids = set(t['pid'] for t in tree)
            would = [h['pid'] for h in res.get('would_kill', [])]
            others = [h['pid'] for h in res.get('holders', []) if h['pid'] not in tree_pids]
            schedulers = [t['pid'] for t in tree if t['role'] == 'scheduler']
            if not would or not set(would) <= tree_pids or not set(schedulers) <= set(would):
                self.say('%s: check mode would kill %s (tree %s): no signal sent' % (name, would, sorted(tree_pids)))
                rec['error'] = 'check mode selected %s' % would
                self.cleanup(proc, tree)
                self.cycles.append(rec)
                return rec
            for poller in pollers:
                poller.start()
            watcher.start()
            time.sleep(0.3)
            gr = self.gpu_reset(self.reset_params(mode, others), check=False)
            t_signal = None
            rec['alive_after_gpu_reset'] = dict((str(t['pid']), t['role']) for t in tree if not gone(t['pid']))
        else:
            for poller in pollers:
                poller.start()
            watcher.start()
            time.sleep(0.3)
            sig = signal.SIGKILL if mode == 'kill-tree' else signal.SIGTERM
            t_signal = now()
            for t in tree:
                try:
                    os.kill(t['pid'], sig)
                except OSError:
                    pass
            rec['signal'] = 'SIGKILL' if sig == signal.SIGKILL else 'SIGTERM'
        # wait for the memory and the tree
        end = now() + 20
        while now() < end:
            last = smi.samples[-1][2] if smi.samples else None
            if last is not None and last <= baseline + 64 and len(watcher.gone) == len(tree):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        for poller in pollers:
            poller.stop()
        watcher.stop()
        rec['left_alive_killed'] = self.cleanup(proc, tree)
        terms = self.term_times(ready)
        rec['sigterm_seen'] = terms
        if gr is not None:
            sched_terms = [v for k, v in terms.items() if k.startswith('scheduler')]
            t_signal = min(sched_terms) if sched_terms else None
            rec['gpu_reset'] = self.short_result(gr)
            rec['signal'] = 'gpu_reset'
            if t_signal is None:
                rec['error'] = 'no scheduler recorded SIGTERM'
                self.cycles.append(rec)
                return rec
            rec['gpu_reset_call_to_sigterm_s'] = round(t_signal - gr['t_call'], 3)
            rec['gpu_reset_sigterm_to_return_s'] = round(gr['t_return'] - t_signal, 3)
        rec['t_signal'] = t_signal
        rec['exit_s'] = dict((str(pid), round(t - t_signal, 4)) for pid, t in watcher.gone.items())
        sched = [watcher.gone.get(t['pid']) for t in tree if t['role'] == 'scheduler']
        rec['schedulers_gone_s'] = round(max(sched) - t_signal, 4) if all(sched) else None
        busy = rec['busy_mib'] or 0.0
        for poller in pollers:
            key = poller.kind
            base = baseline if key == 'smi' else (poller.samples[0][2] - busy + baseline if poller.samples else 0.0)
            rec[key] = {
                'error': poller.error, 'polls': len(poller.samples),
                'period_s': round((poller.samples[-1][0] - poller.samples[0][0]) / max(1, len(poller.samples) - 1), 4)
                if poller.samples else None,
                'first_drop': crossing(poller.samples, t_signal, (poller.samples[0][2] if poller.samples else 0) - 1024),
                'under_1024': crossing(poller.samples, t_signal, 1024 + (base - baseline)),
                'idle': crossing(poller.samples, t_signal, base + 64),
                'trace': thin(poller.samples, t_signal),
            }
        self.cycles.append(rec)
        self.report_cycle(rec)
        return rec

    def reset_params(self, mode, protected):
        return {'term_grace': 1.0 if mode == 'gr-kill' else 5.0, 'timeout': 30, 'gpus': [self.args.index],
                'memory_threshold_mib': 1024, 'devices': self.args.devices, 'nvidia_smi': self.args.nvidia_smi,
                'protected_pids': protected, 'hard_reset': False}

    @staticmethod
    def short_result(call):
        res = call['result'] or {}
        keep = {'rc': call['rc'], 'wall_s': round(call['t_return'] - call['t_call'], 3)}
        for key in ('failed', 'msg', 'changed', 'killed', 'seconds', 'seconds_to_free', 'memory_before', 'memory_after',
                    'sources_used', 'hard_reset_done'):
            if key in res:
                keep[key] = res[key]
        keep['holders'] = [dict((k, h.get(k)) for k in ('pid', 'name', 'sources', 'devices', 'used_mib', 'state'))
                           for h in res.get('holders', [])]
        keep['would_kill'] = [h.get('pid') for h in res.get('would_kill', [])]
        keep['spared'] = [{'pid': h.get('pid'), 'name': h.get('name'), 'why': h.get('why')} for h in res.get('spared', [])]
        return keep

    def probe_stages(self, proc, stage_dir):
        """At each stage of the main process: its device fds/maps, fuser, nvidia-smi, and (2, 3, 5) gpu_reset's preview."""
        stages = []
        for number, what in STAGES:
            end = now() + 240
            info = None
            while now() < end and proc.poll() is None:
                info = read_json(os.path.join(stage_dir, 'stage-%d.json' % number))
                if info:
                    break
                time.sleep(0.02)
            if not info:
                stages.append({'stage': number, 'what': what, 'error': 'not reached'})
                break
            pid = info['pid']
            time.sleep(0.2)
            fus = self.fuser_pids()
            row = {'stage': number, 'what': what, 'main_pid': pid, 'main_devices': device_use(pid, self.args.devices),
                   'main_in_fuser': None if fus is None else pid in fus,
                   'main_in_compute_apps': [a for a in self.compute_apps() if a['pid'] == pid],
                   'memory_used_mib': self.memory_used()}
            if number in (2, 3, 5) and self.args.ansible:
                check = self.gpu_reset(self.reset_params('gr-term', []), check=True)
                res = check['result'] or {}
                row['gpu_reset_check_main'] = {
                    'holder': [dict((k, h.get(k)) for k in ('pid', 'name', 'sources', 'devices', 'used_mib'))
                               for h in res.get('holders', []) if h['pid'] == pid],
                    'would_kill_main': pid in [h.get('pid') for h in res.get('would_kill', [])],
                    'would_kill': [h.get('pid') for h in res.get('would_kill', [])]}
            stages.append(row)
            self.say('probe stage %d (%s): main pid %d fds %s maps %d, fuser %s, compute-apps %s, memory.used %s%s'
                     % (number, what, pid, row['main_devices']['fds'], len(row['main_devices']['maps']),
                        row['main_in_fuser'], row['main_in_compute_apps'], row['memory_used_mib'],
                        ('; gpu_reset preview: main holder=%s would_kill_main=%s'
                         % (bool(row['gpu_reset_check_main']['holder']), row['gpu_reset_check_main']['would_kill_main']))
                        if 'gpu_reset_check_main' in row else ''))
            with open(os.path.join(stage_dir, 'go-%d' % number), 'w') as handle:
                handle.write('go\n')
        return stages

    def report_cycle(self, rec):
        def fmt(c):
            return '%s..%s' % (c['last_held_s'], c['first_seen_s']) if c else 'never'
        msg = '%s: %s, start %.1f s, busy %s MiB, schedulers gone %s s' % (
            rec['name'], rec.get('signal'), rec.get('start_s', 0), rec.get('busy_mib'), rec.get('schedulers_gone_s'))
        for key in ('smi', 'nvml'):
            if key in rec:
                msg += '; %s under-1024 %s idle %s' % (key, fmt(rec[key]['under_1024']), fmt(rec[key]['idle']))
        if 'gpu_reset' in rec:
            g = rec['gpu_reset']
            msg += '; gpu_reset seconds_to_free %s killed %s, alive after it: %s' % (
                g.get('seconds_to_free'), [(k['pid'], k['signal'], k['seconds']) for k in g.get('killed', [])],
                rec.get('alive_after_gpu_reset'))
        self.say(msg)

    def summary(self):
        out = {}
        for mode in sorted(set(c['mode'] for c in self.cycles)):
            for gib in sorted(set(c['gib_per_scheduler'] for c in self.cycles if c['mode'] == mode)):
                rows = [c for c in self.cycles if c['mode'] == mode and c['gib_per_scheduler'] == gib and 'error' not in c]
                if not rows:
                    continue
                item = {'n': len(rows)}
                for label, get in (
                        ('schedulers_gone_s', lambda c: c.get('schedulers_gone_s')),
                        ('smi_under_1024_first_seen_s', lambda c: (c.get('smi', {}).get('under_1024') or {}).get('first_seen_s')),
                        ('smi_under_1024_last_held_s', lambda c: (c.get('smi', {}).get('under_1024') or {}).get('last_held_s')),
                        ('smi_idle_first_seen_s', lambda c: (c.get('smi', {}).get('idle') or {}).get('first_seen_s')),
                        ('nvml_under_1024_first_seen_s', lambda c: (c.get('nvml', {}).get('under_1024') or {}).get('first_seen_s')),
                        ('nvml_under_1024_last_held_s', lambda c: (c.get('nvml', {}).get('under_1024') or {}).get('last_held_s')),
                        ('nvml_first_drop_first_seen_s', lambda c: (c.get('nvml', {}).get('first_drop') or {}).get('first_seen_s')),
                        ('nvml_idle_first_seen_s', lambda c: (c.get('nvml', {}).get('idle') or {}).get('first_seen_s')),
                        ('gpu_reset_seconds_to_free', lambda c: (c.get('gpu_reset') or {}).get('seconds_to_free')),
                        ('gpu_reset_call_to_sigterm_s', lambda c: c.get('gpu_reset_call_to_sigterm_s')),
                        ('start_s', lambda c: c.get('start_s'))):
                    values = [get(c) for c in rows]
                    values = [v for v in values if v is not None]
                    if values:
                        item[label] = {'median': median(values), 'max': max(values), 'min': min(values),
                                       'values': values}
                if mode.startswith('gr-'):
                    late = []
                    for c in rows:
                        rep = (c.get('gpu_reset') or {}).get('seconds_to_free')
                        killed = [k['seconds'] for k in (c.get('gpu_reset') or {}).get('killed', [])
                                  if (k.get('name') or '').startswith('sglang')]
                        if killed and c.get('schedulers_gone_s') is not None:
                            late.append({'source': 'proc', 'reported_killed_s': max(killed),
                                         'measured_schedulers_gone_s': c['schedulers_gone_s']})
                        for key in ('nvml', 'smi'):
                            cross = (c.get(key) or {}).get('under_1024')
                            if rep is not None and cross:
                                late.append({'source': key, 'reported': rep, 'measured_first_seen': cross['first_seen_s'],
                                             'measured_last_held': cross['last_held_s'],
                                             'late_by_at_least_s': round(rep - cross['first_seen_s'], 4),
                                             'late_by_at_most_s': round(rep - cross['last_held_s'], 4)})
                    item['reported_vs_measured'] = late
                out['%s/%dGiBx%d' % (mode, int(gib), self.args.gpu_children)] = item
        return out

    def main(self):
        args = self.args
        if not os.path.isdir(os.path.join(self.out, 'trees')):
            os.makedirs(os.path.join(self.out, 'trees'))
        env = {'python': sys.version.split()[0], 'platform': platform.platform(), 'nvml': self.has_nvml,
               'ansible': args.ansible, 'backend': args.backend}
        if args.backend == 'torch':
            rc, out, err, dummy = run([sys.executable, '-c', 'import torch; print(torch.__version__, torch.version.cuda,'
                                       ' torch.cuda.get_device_name(0))'])
            env['torch'] = out.strip() or err.strip()[-300:]
        rc, out, err, dummy = run([args.nvidia_smi, '--query-gpu=name,driver_version,memory.total,memory.used',
                                   '--format=csv,noheader'])
        env['gpu'] = out.strip()
        rc, out, err, dummy = run(['fuser', '-V'])
        env['fuser'] = (out + err).strip().splitlines()[0] if (out + err).strip() else None
        self.say('environment: %s' % json.dumps(env))
        plan = []
        if args.probe:
            plan.append(('gr-term', 100, args.gib, True))
        for rep in range(args.reps_gr):
            plan += [('gr-term', rep, args.gib, False), ('gr-kill', rep, args.gib, False)]
        for rep in range(args.reps):
            plan += [('kill-tree', rep, args.gib, False), ('term-tree-default', rep, args.gib, False),
                     ('term-tree-exit', rep, args.gib, False)]
        for rep in range(args.reps_big):
            plan += [('kill-tree', rep, args.big_gib, False), ('term-tree-exit', rep, args.big_gib, False)]
        skipped = []
        for mode, rep, gib, probe in plan:
            if now() - self.t_start > args.budget_s:
                skipped.append('%s-%d-%dg' % (mode, rep, int(gib)))
                continue
            self.cycle(mode, rep, gib, probe=probe)
        if skipped:
            self.say('budget spent: skipped %s' % skipped)
        result = {'env': env, 'args': vars(args), 'summary': self.summary(), 'skipped': skipped,
                  'cycles': self.cycles, 'wall_s': round(now() - self.t_start, 1)}
        with open(os.path.join(self.out, 'process-tree.json'), 'w') as handle:
            json.dump(result, handle, indent=1, sort_keys=True)
        self.say('summary (seconds after the first signal: median / max over n runs):')
        for key, item in sorted(result['summary'].items()):
            parts = ['%s %s/%s' % (label, v['median'], v['max']) for label, v in sorted(item.items())
                     if isinstance(v, dict) and label != 'start_s']
            self.say('  %s n=%d start %s/%s s: %s' % (key, item['n'], item.get('start_s', {}).get('median'),
                                                      item.get('start_s', {}).get('max'), '; '.join(parts)))
            for row in item.get('reported_vs_measured', []):
                self.say('    gpu_reset vs measured: %s' % json.dumps(row, sort_keys=True))
        return 0 if not any('error' in c for c in self.cycles) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command')
    tree = sub.add_parser('tree', help='the SGLang-shaped main process')
    tree.add_argument('--ready-file', required=True)
    tree.add_argument('--gpu-children', type=int, default=2)
    tree.add_argument('--cpu-children', type=int, default=1)
    tree.add_argument('--gib', type=float, default=16.0)
    tree.add_argument('--device', default='cuda:0')
    tree.add_argument('--child-term', choices=['default', 'exit', 'ignore'], default='default',
                      help='what a child does on SIGTERM: die at once (no handler), exit through Python, ignore it')
    tree.add_argument('--drain-seconds', type=float, default=3.0)
    tree.add_argument('--watchdog-delay', type=float, default=1.0)
    tree.add_argument('--max-seconds', type=float, default=300.0)
    tree.add_argument('--stage-dir')
    tree.add_argument('--backend', choices=['torch', 'fakegpu'], default='torch')
    meas = sub.add_parser('measure', help='start trees, end them, time the GPU memory')
    meas.add_argument('--out', required=True)
    meas.add_argument('--index', type=int, default=0)
    meas.add_argument('--gpu-children', type=int, default=2)
    meas.add_argument('--gib', type=float, default=16.0)
    meas.add_argument('--big-gib', type=float, default=60.0)
    meas.add_argument('--reps', type=int, default=5)
    meas.add_argument('--reps-gr', type=int, default=2)
    meas.add_argument('--reps-big', type=int, default=1)
    meas.add_argument('--no-probe', dest='probe', action='store_false')
    meas.add_argument('--budget-s', type=float, default=300.0, help='start no new tree after this many seconds')
    meas.add_argument('--drain-seconds', type=float, default=3.0)
    meas.add_argument('--watchdog-delay', type=float, default=1.0)
    meas.add_argument('--tree-max-seconds', type=float, default=240.0)
    meas.add_argument('--ansible', default='', help='the ansible (ad-hoc) command; empty: no gpu_reset cycles')
    meas.add_argument('--nvidia-smi', default='nvidia-smi')
    meas.add_argument('--devices', default='/dev/nvidia*')
    meas.add_argument('--backend', choices=['torch', 'fakegpu'], default='torch')
    args = parser.parse_args(argv)
    if args.command == 'tree':
        return tree_main(args)
    if args.command == 'measure':
        if not args.ansible:
            args.reps_gr = 0
            args.probe = args.probe and False
        return Driver(args).main()
    parser.print_help()
    return 2


if __name__ == '__main__':
    sys.exit(main())
