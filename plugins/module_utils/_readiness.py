# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of an SGLang server: the watchers, the probes and the wait loop of the await_server_ready module.

The wait watches, together, the server's log (a journal or a file, ``logsource``), its process (a systemd unit's
main process, a PID, or nothing) and its health endpoint, and returns as soon as it can tell: ready, or why not
(``sglang_log`` classifies the lines).  ``run(module)`` is the whole module behind its argument spec.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal as signal_mod
import threading
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import _proctree
from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import activity
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http as sghttp
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.plugins.module_utils import smoke
from ansible_collections.llmserve.sglang.plugins.module_utils.logsource import FileLog, JournalLog

SYSTEMD_PROPS = ('MainPID', 'ExecMainPID', 'ActiveState', 'SubState', 'Result', 'ExecMainStatus', 'ExecMainCode',
                 'InvocationID', 'ExecMainStartTimestampMonotonic', 'ActiveEnterTimestampMonotonic',
                 'ExecMainStartTimestamp', 'NRestarts', 'ControlGroup')
# How long the wait keeps reading after the event, so that the verdict carries the whole traceback and the exit
# status (tests/bench/detect_latency.py measures the resulting latency: median about 0.25 s after the event):
#   fatal_grace  at most this long after a fatal line while the process is alive ...
#   fatal_quiet  ... and no longer than until the log has been quiet this long (a traceback comes in one burst);
#   drain_min    after the process died, until the log has been quiet this long (journald may lag a little);
#   drain_max    at most this long after the death.
#   traceback_grace  at most this long after a fatal line while its traceback has no exception line yet.
#   probe_grace  after a failed probe request, how long to watch for the death or fatal line it may have caused
#                (a scheduler's exception ends the tree within about a second of the failed answer).
#   tree_every   how often the ranks (schedulers, detokenizers) are looked at in /proc (_proctree.RankWatch); the
#                wait reads the log at least this often while it watches them;
#   tree_scan    how often the unit's processes are searched for new ranks;
#   rank_linger  after a rank's death, how long the log is still read before the verdict: lines already on their
#                way (a traceback the rank wrote as it died) join the evidence. The death itself is the evidence;
#                SGLang's watchdog logs it 0 to 1 s later (its line joins when it comes within this read).
TIMING = {'fatal_grace': 0.5, 'fatal_quiet': 0.15, 'drain_min': 0.15, 'drain_max': 0.8, 'traceback_grace': 1.5,
          'probe_grace': 2.0, 'tree_every': 0.1, 'tree_scan': 0.5, 'rank_linger': 0.1}

CLD_EXITED = 1
CLD_KILLED = 2
CLD_DUMPED = 3


def signal_name(num):
    try:
        return signal_mod.Signals(num).name.replace('SIG', '')
    except (ValueError, AttributeError):
        return str(num)


def proc_state(pid):
    """Return ``(alive, exit_status_or_None)`` from /proc; a zombie counts as dead and tells its wait status."""
    if not pid or pid <= 0:
        return False, None
    try:
        with open('/proc/%d/stat' % pid) as f:
            data = f.read()
    except (IOError, OSError):
        return False, None
    rest = data[data.rfind(')') + 2:].split()
    if rest and rest[0] in ('Z', 'X'):
        status = None
        if len(rest) >= 50:   # field 52 (exit_code), Linux >= 3.5
            try:
                status = int(rest[49])
            except ValueError:
                status = None
        return False, status
    return True, None


def proc_elapsed(pid):
    """Seconds since the process started (from /proc), or None."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            data = f.read()
        start_ticks = int(data[data.rfind(')') + 2:].split()[19])
        with open('/proc/uptime') as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / float(os.sysconf('SC_CLK_TCK'))
    except (IOError, OSError, ValueError, IndexError):
        return None


# --------------------------------------------------------------------------- process watchers
class UnitWatch(object):
    """A systemd unit's main process: fast /proc checks every tick, ``systemctl show`` every second or on change."""

    def __init__(self, module, unit, systemctl):
        self.module = module
        self.unit = unit
        self.systemctl = systemctl
        self.props = {}
        self.last_show = 0.0
        self.invocation = None
        self.pid = 0
        self.refresh()
        self.invocation = self.props.get('InvocationID') or None

    def refresh(self):
        rc, out, err = self.module.run_command([self.systemctl, 'show', '-p', ','.join(SYSTEMD_PROPS), self.unit])
        if rc != 0:
            self.module.fail_json(msg='systemctl show %s failed (rc=%s): %s' % (self.unit, rc, err.strip()))
        self.props = _systemd.parse_show(out)
        self.last_show = time.time()
        for key in ('MainPID', 'ExecMainPID'):     # ExecMainPID stays known after the process is gone
            try:
                pid = int(self.props.get(key) or 0)
            except ValueError:
                pid = 0
            if pid:
                self.pid = pid
                break
        return self.props

    def started_monotonic(self):
        for key in ('ExecMainStartTimestampMonotonic', 'ActiveEnterTimestampMonotonic'):
            try:
                v = int(self.props.get(key) or 0)
            except ValueError:
                v = 0
            if v:
                return v / 1e6
        return None

    def dead(self, now):
        """Return True when the unit's process is gone (or the unit restarted into a new invocation)."""
        if self.pid and proc_state(self.pid)[0] and now - self.last_show < 1.0:
            return False
        return self.ended()

    def ended(self):
        """Ask systemd now: True when the unit's process is gone, the unit stops, or it restarted into a new
        invocation."""
        p = self.refresh()
        inv = p.get('InvocationID') or None
        if self.invocation and inv and inv != self.invocation:
            return True
        if p.get('SubState') == 'auto-restart':
            return True
        if p.get('ActiveState') in ('failed', 'inactive', 'deactivating'):
            return True
        if p.get('MainPID') in ('0', '') and p.get('ActiveState') != 'activating':
            return True
        return False

    def exit_info(self):
        """``(signal, exit_code, systemd_result)`` of the ended main process."""
        p = self.props
        try:
            code = int(p.get('ExecMainCode') or 0)
            status = int(p.get('ExecMainStatus') or 0)
        except ValueError:
            code, status = 0, 0
        if code in (CLD_KILLED, CLD_DUMPED):
            return status, None, p.get('Result')
        if code == CLD_EXITED:
            return None, status, p.get('Result')
        return None, None, p.get('Result')

    def summary(self):
        keys = ('ActiveState', 'SubState', 'Result', 'MainPID', 'ExecMainPID', 'ExecMainCode', 'ExecMainStatus',
                'InvocationID', 'NRestarts')
        return dict((k, self.props.get(k)) for k in keys if k in self.props)

    def usage(self):
        """``(cpu_seconds, read_bytes)`` of the unit's processes (its cgroup, else the main PID's tree)."""
        return activity.cgroup_usage(self.props.get('ControlGroup')) or activity.tree_usage(self.pid)


class PidWatch(object):
    def __init__(self, pid):
        self.pid = pid
        self.status = None

    def dead(self, now):
        alive, status = proc_state(self.pid)
        if not alive and status is not None:
            self.status = status
        return not alive

    def exit_info(self):
        if self.status is None:
            return None, None, None
        if self.status & 0x7f:
            return self.status & 0x7f, None, None
        return None, (self.status >> 8) & 0xff, None

    def summary(self):
        return None

    def usage(self):
        return activity.tree_usage(self.pid)


class NoWatch(object):
    pid = 0

    def dead(self, now):
        return False

    def exit_info(self):
        return None, None, None

    def summary(self):
        return None


# --------------------------------------------------------------------------- health probe
class HealthProbe(object):
    """Probes the health endpoint in a thread so a slow answer never delays crash detection."""

    def __init__(self, url, api_key, timeout, validate_certs, interval=0.5):
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.interval = interval
        self.last = None        # Reply
        self.ok = False
        self.thread = None
        self.next_at = 0.0

    def kick(self, now):
        if self.ok or (self.thread is not None and self.thread.is_alive()) or now < self.next_at:
            return
        self.thread = threading.Thread(target=self._run, name='health')
        self.thread.daemon = True
        self.thread.start()

    def busy(self):
        """A probe sent and not answered yet."""
        return self.thread is not None and self.thread.is_alive()

    def _run(self):
        r = sghttp.get(self.url, api_key=self.api_key, timeout=self.timeout, validate_certs=self.validate_certs)
        self.last = r
        if r.status == 200:
            self.ok = True
        self.next_at = time.time() + self.interval


class InThread(object):
    """A request of the wait (``kick()`` starts it in a thread once; ``done`` when ``result`` is set), so that the
    wait keeps watching the server while it runs. Subclasses set ``result`` in ``_run()``."""
    name = 'request'
    result = None
    thread = None

    @property
    def done(self):
        return self.result is not None

    def kick(self):
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name=self.name)
            self.thread.daemon = True
            self.thread.start()

    def _run(self):
        raise NotImplementedError


class RequestProbe(InThread):
    """The one request of O(probe), sent in a thread once the server is ready, so the wait keeps watching."""
    name = 'probe'

    def __init__(self, base, spec, api_key, validate_certs, post=sghttp.post_json):
        self.prompt = smoke.normalize_prompt(dict(spec, name='probe'))
        self.path, self.body = smoke.build_request(self.prompt, model=spec.get('model'))
        self.url = base + self.path
        self.api_key = api_key
        self.timeout = spec['timeout']
        self.validate_certs = validate_certs
        self.post = post
        self.result = None      # the check dict (smoke.check_response, text not judged) once answered

    def _run(self):
        r = self.post(self.url, self.body, api_key=self.api_key, timeout=self.timeout,
                      validate_certs=self.validate_certs)
        self.result = smoke.check_response(self.prompt, r.status, r.body, seconds=round(r.seconds, 3),
                                           error=r.error, judge=False)


# --------------------------------------------------------------------------- the wait
STOP = 'stop'       # a step's verdict: the wait is over (the result is in Wait.res)
AGAIN = 'again'     # a step's verdict: read again before deciding anything else


def server_start(p, watch, t_call):
    """When the server started: the unit's start, else O(start_time), else the process's start, else t_call."""
    mono_start = watch.started_monotonic() if hasattr(watch, 'started_monotonic') else None
    if mono_start is not None:
        return t_call - (time.monotonic() - mono_start)
    if p['start_time']:
        return p['start_time']
    elapsed = proc_elapsed(watch.pid) if getattr(watch, 'pid', 0) else None
    if elapsed is not None:
        return t_call - elapsed
    return t_call


class Times(object):
    """The moments the wait decides by (seconds since the epoch, None until they happen)."""

    def __init__(self, p, watch, t_call):
        self.t_call = t_call
        self.t_server = server_start(p, watch, t_call)
        # a server that already runs may have logged nothing for hours: its hang clock starts with this call
        self.last_activity = self.t_server if p['require_ready_line'] else t_call
        self.ready_at = None    # the ready line's time (or the first readiness check without one)
        self.fatal_at = None    # when a fatal line was first seen
        self.dead_at = None     # when the process was first seen dead
        self.rank_dead_at = None  # when a rank (scheduler, detokenizer) was seen dead while the main process lived
        self.line_at = None     # when the latest lines were read
        self.failed_at = None   # when the probe request failed

    def deadline_base(self, p):
        """A start-up is bounded from the server's start; a check of a server that already runs (no ready line
        required) is bounded from this call, however long the server has been up."""
        return self.t_server if p['require_ready_line'] else self.t_call


class Wait(object):
    """One call's wait: each tick reads the log, looks at the process, then takes the first verdict of its steps.

    ``tree``: a :class:`_proctree.RankWatch` on the watched process's ranks, or None."""

    def __init__(self, p, watch, log, probe, state, check_mode=False, clock=time.time, request=None, tree=None):
        self.p = p
        self.watch = watch
        self.log = log
        self.probe = probe
        self.state = state
        self.check_mode = check_mode
        self.clock = clock
        self.request = request
        self.tree = tree
        self.rank_death = None  # _proctree.death() of the rank seen dead, while its verdict waits
        self.times = Times(p, watch, clock())
        self.res = {'status': 'loading', 'reason': None, 'signal': None, 'exit_code': None}
        # silence is a hang only while the server is also idle (no CPU, no reads): loads and compiles can be silent
        self.work = activity.Activity(getattr(watch, 'usage', lambda: None))
        self.first_milestone = None  # the milestone after this call's first read and its older lines (step_expired)
        self.ticks = 0

    def run(self):
        while self.tick() != STOP:
            pass
        now = self.clock()
        self.res['elapsed'] = round(now - self.times.t_server, 3)
        self.res['seconds'] = round(now - self.times.t_call, 3)
        return self.res

    def tick(self):
        now, lines = self.read()
        if not self.ticks:
            self.first_milestone = self.state.milestone
        self.ticks += 1
        self.look_at_process(now)
        return (self.after_death(now, lines) or self.after_rank_death(now) or self.after_fatal_line(now)
                or self.readiness_or_hang(now) or self.past_timeout(now) or self.step_expired(now))

    def stop(self, status):
        self.res.update(status=status, reason=None if status == 'ready' else status)
        return STOP

    # ------------------------------------------------------------------ reading
    def read(self):
        """Wait for lines (at most one poll interval) and feed them; ``(now, lines)``."""
        t = self.times
        # once something fatal was seen, look more often: the verdict is a few reads away
        interval = self.p['poll_interval']
        if self.tree is not None:
            interval = min(interval, self.p['tree_every'])
        if t.fatal_at is not None or t.dead_at is not None or t.rank_dead_at is not None:
            interval = min(interval, 0.05)
        lines = self.log.poll(interval) if self.log is not None else []
        if self.log is None and not self.check_mode:
            time.sleep(interval)
        now = self.clock()
        if lines:
            self.feed(lines, now)
        if self.state.reason and t.fatal_at is None:
            t.fatal_at = now
        return now, lines

    def feed(self, lines, now):
        t = self.times
        t.line_at = now
        t.last_activity = max(t.last_activity, max(ts if ts is not None else now for _l, ts in lines))
        for line, ts in lines:
            had_ready = self.state.ready
            self.state.feed(line)
            if ts is not None and ts < t.t_call:
                # logged before this call (the journal's backlog may come after the first read): no change
                self.first_milestone = self.state.milestone
            if self.state.ready and not had_ready:
                t.ready_at = ts if ts is not None else now
                if not self.p['require_ready_line']:
                    # a server that already runs logged its ready line long ago: its health gets
                    # unhealthy_timeout from this call
                    t.ready_at = max(t.ready_at, t.t_call)

    def look_at_process(self, now):
        if self.times.dead_at is None and self.watch.dead(now):
            self.saw_death(now)
        elif self.times.dead_at is None and self.rank_death is None and self.tree is not None:
            self.look_at_ranks(now)

    def saw_death(self, now):
        self.times.dead_at = now
        if (not self.state.reason or self.state.in_traceback) and hasattr(self.log, 'sync'):
            # nothing fatal seen yet, or a traceback without its last line: let journald catch up before
            # calling it a silent kill or taking a traceback's first lines as its evidence
            self.log.sync()

    def look_at_ranks(self, now):
        """A scheduler or detokenizer that died while the main process lives is the verdict, unless the log said
        why before (then the log decides, the death is its consequence) or the unit is stopping (a stop ends the
        ranks first: the main process's end decides)."""
        death = self.tree.poll(now, self.watch.pid, (getattr(self.watch, 'props', None) or {}).get('ControlGroup'))
        if death is None:
            return
        self.rank_death = death
        if hasattr(self.watch, 'ended') and self.watch.ended():
            self.saw_death(now)
            return
        if self.state.reason not in (None, 'unhealthy'):
            return
        self.times.rank_dead_at = now
        if hasattr(self.log, 'sync'):
            self.log.sync()     # what the rank wrote before it died (a fatal error's stack) is read next

    # ------------------------------------------------------------------ the steps, in order
    def after_death(self, now, lines):
        """The process is gone: drain what it still wrote (the journal may lag a little), then decide; a traceback
        still open (no exception line yet) gets up to drain_max."""
        dead_at = self.times.dead_at
        if dead_at is None:
            return None
        drained = not lines and now - dead_at >= self.p['drain_min'] and not self.state.in_traceback
        if not (drained or now - dead_at > self.p['drain_max'] or self.check_mode):
            return AGAIN
        sig, code, result = self.watch.exit_info()
        self.res['signal'], self.res['exit_code'] = sig, code
        return self.stop(sglang_log.final_reason(self.state.reason, sig, result))

    def after_rank_death(self, now):
        """A rank died while the main process lives: read the log a moment longer (SGLang's line about the death,
        when it comes that soon), then decide as that line would: ``killed`` (``oom`` in a unit that systemd marks
        oom-kill) for SIGKILL or SIGTERM, else ``crashed``; SGLang's line about the death gives its reason. A fatal
        line of its own meanwhile is decided by :meth:`after_fatal_line` and the main process ending meanwhile (a
        stop, SGLang ending its tree) by :meth:`after_death`."""
        rank_dead_at = self.times.rank_dead_at
        if rank_dead_at is None:
            return None
        if now - rank_dead_at < self.p['rank_linger'] and not self.check_mode:
            return AGAIN
        self.res['rank_death'] = self.rank_death
        if self.state.reason not in (None, 'unhealthy') and not self.state.reason_from_child:
            return None     # the log said why meanwhile (SGLang ends its ranks after it): it decides, as read to its end
        reason = self.state.reason if self.state.reason not in (None, 'unhealthy') else self.rank_death['reason']
        return self.stop(self.unit_reason(reason))

    def unit_reason(self, reason):
        """A child's ``killed`` while the main process lives: systemd's Result=oom-kill makes it ``oom``."""
        if reason == 'killed' and hasattr(self.watch, 'exit_info'):
            if hasattr(self.watch, 'refresh'):
                self.watch.refresh()
            reason = sglang_log.final_reason(reason, unit_result=self.watch.exit_info()[2])
        return reason

    def after_fatal_line(self, now):
        """A fatal line while the process lives: keep reading the traceback for a moment (the process usually dies
        within it); a traceback without its exception line yet is not done (a loaded host's journald can pause)."""
        p, state, fatal_at = self.p, self.state, self.times.fatal_at
        if fatal_at is None or state.reason == 'unhealthy':
            return None
        quiet = (now - max(fatal_at, self.times.line_at or fatal_at) >= p.get('fatal_quiet', p['fatal_grace'])
                 and not state.in_traceback)
        grace = p.get('traceback_grace', p['fatal_grace']) if state.in_traceback else p['fatal_grace']
        if not (quiet or now - fatal_at >= grace or self.check_mode):
            return AGAIN
        return self.stop(self.unit_reason(state.reason))

    def readiness_or_hang(self, now):
        if self.state.ready or not self.p['require_ready_line']:
            return self.readiness(now)
        if self.work.poll(now):
            self.times.last_activity = max(self.times.last_activity, now)
        elif now - self.times.last_activity > self.p['hang_timeout'] and self.work.judged():
            return self.stop('hang')
        return None

    def readiness(self, now):
        """Ready (or no ready line required): the health endpoint must answer 200 within unhealthy_timeout."""
        t = self.times
        if t.ready_at is None:
            t.ready_at = now
        self.probe.kick(now)
        if self.probe.ok and (self.request is None or self.check_mode):
            return self.stop('ready')
        if self.probe.ok:
            return self.probe_request(now)
        said_unhealthy = self.state.reason == 'unhealthy' and now - t.ready_at > 5
        if now - t.ready_at > self.p['unhealthy_timeout'] or said_unhealthy:
            return self.stop('unhealthy')
        return None

    def probe_request(self, now):
        """Healthy: now the one request, still watching the process and the log (the steps before this one)."""
        self.request.kick()
        if self.request.done and self.request.result['ok']:
            return self.stop('ready')
        if self.request.done:
            self.times.failed_at = self.times.failed_at or now
            if now - self.times.failed_at >= self.p['probe_grace']:
                return self.stop('unhealthy')
        return None

    def past_timeout(self, now):
        if now - self.times.deadline_base(self.p) >= self.p['timeout']:
            return self.stop('timeout')
        return None

    def step_expired(self, now):
        """Check mode looks once; with O(step), return C(loading) (a call with a probe request or a health probe
        in flight waits for its answer: SGLang answers C(/health_generate) on its own 1-s tick, and a call that
        gave up on it would send the next call's probe to the same fate); with O(progress) too, as soon as the
        milestone changed, once the call is O(progress) old."""
        p, request = self.p, self.request
        if self.check_mode:
            return STOP
        if not p['step'] or (request is not None and request.thread is not None):
            return None
        if self.probe.busy():
            return None
        waited = now - self.times.t_call
        moved = p.get('progress') and waited >= p['progress'] and self.state.milestone != self.first_milestone
        return STOP if waited >= p['step'] or moved else None


def wait(p, watch, log, probe, state, check_mode=False, clock=time.time, request=None, tree=None):
    """Wait until the server is ready, failed, or (with O(step)) the step is over; the result's ``status``,
    ``reason``, ``signal``, ``exit_code``, ``elapsed`` and ``seconds`` (and ``rank_death`` when a rank's death
    decided it)."""
    return Wait(p, watch, log, probe, state, check_mode=check_mode, clock=clock, request=request, tree=tree).run()


# --------------------------------------------------------------------------- the module
def check_params(module, p):
    """Fail on out-of-range options; the compiled ``(extra_fatal, extra_telling)`` patterns."""
    if p['poll_interval'] <= 0 or p['poll_interval'] > 1:
        module.fail_json(msg='poll_interval must be in (0, 1] seconds, got %s' % p['poll_interval'])
    for key in ('timeout', 'hang_timeout', 'unhealthy_timeout'):
        if p[key] <= 0:
            module.fail_json(msg='%s must be greater than 0, got %s' % (key, p[key]))
    try:
        extra_fatal = sglang_log.compile_patterns(p['fatal_patterns'])
        extra_telling = [(0, rx) for _r, rx in sglang_log.compile_patterns(p['telling_patterns'])]
    except Exception as e:
        module.fail_json(msg='invalid pattern in fatal_patterns/telling_patterns: %s' % e)
    for reason, dummy in extra_fatal:
        if reason not in sglang_log.REASON_PRIORITY:
            module.fail_json(msg='fatal_patterns: reason must be one of %s, got %r'
                             % (', '.join(sglang_log.REASON_PRIORITY), reason))
    return extra_fatal, extra_telling


def unit_name(service_name):
    """The systemd unit of O(service_name) (``.service`` added unless it has a unit suffix), or None."""
    if service_name and not service_name.endswith(('.service', '.scope')):
        return service_name + '.service'
    return service_name


def make_watch(module, p, unit):
    if unit:
        return UnitWatch(module, unit, module.get_bin_path('systemctl', required=True))
    if p['pid']:
        return PidWatch(p['pid'])
    return NoWatch()


def make_tree(p, watch):
    """The watch on the ranks under the watched process (none without a process to watch)."""
    if not isinstance(watch, (UnitWatch, PidWatch)):
        return None
    return _proctree.RankWatch(every=p['tree_every'], scan_every=p['tree_scan'])


def open_log(module, p, unit, watch):
    """The log file of O(log_path), else the journal of the unit's current invocation."""
    if p['log_path']:
        try:
            return FileLog(p['log_path'], cursor=p['cursor'], since=p['since'])
        except ValueError as e:
            module.fail_json(msg=str(e))
    journalctl = module.get_bin_path('journalctl', required=True)
    since = p['since']
    if not since and not watch.invocation and watch.props.get('ExecMainStartTimestamp'):
        since = watch.props['ExecMainStartTimestamp']
    mode = 'poll' if module.check_mode else p['journal_mode']
    return JournalLog(module.run_command, journalctl, unit, watch.invocation, since=since, mode=mode)


def make_request(module, p):
    """The request of O(probe), or None."""
    if p['probe'] is None:
        return None
    if p['probe']['timeout'] <= 0 or p['probe']['max_tokens'] <= 0:
        module.fail_json(msg='probe: timeout and max_tokens must be greater than 0, got %s and %s'
                         % (p['probe']['timeout'], p['probe']['max_tokens']))
    return RequestProbe(sghttp.base_url(p['host'], p['port'], p['scheme']), p['probe'], p['api_key'],
                        p['validate_certs'])


def other_rank(child_exit, death):
    """Whether SGLang's line about a child's death (``sglang_log.child_exit_of``) names another process than the
    rank the watch saw die: by PID when the line has one, else by kind (scheduler, detokenizer)."""
    if not child_exit:
        return False
    if child_exit.get('pid') and death.get('pid'):
        return child_exit['pid'] != death['pid']
    kinds = [kind for kind in ('scheduler', 'detokenizer') if kind in (death.get('name') or '')]
    return bool(kinds) and kinds[0] not in (child_exit.get('name') or '')


def evidence(p, res, state, watch, probe, request):
    """The evidence lines of the verdict: the log's, after the line that says what the wait itself saw (a process
    that exited after a traceback of its own: its exception line first, then how it ended)."""
    lines = state.evidence()
    status, sig = res['status'], res.get('signal')
    death = res.get('rank_death')
    if death and state.reason not in (None, 'unhealthy') and not state.reason_from_child:
        return lines + [death['line']]      # the log said why: its lines first
    if death and other_rank(state.child_exit, death):
        # SGLang names another rank: the one that died first, unseen (the one seen was ended after it)
        return lines + [death['line']]
    if death:
        return [death['line']] + lines
    if status in ('killed', 'crashed') and not state.reason:
        if sig is not None:
            how = 'signal %s/%s' % (sig, signal_name(sig))
        elif res['exit_code'] is not None:
            how = 'exit status %s' % res['exit_code']
        else:
            how = 'exit status unknown'
        empty = '' if state.lines else '; the log is empty'
        ended = ['process %s ended (%s)%s' % (watch.pid or '?', how, empty)]
        if sig is None and state.last_exception and not state.in_traceback:
            # it exited after a traceback of its own (an argument combination SGLang rejects at start-up, ...):
            # the exception line says why, the exit follows
            last = state.last_exception.strip()
            return [last] + ended + [line for line in lines if line != last]
        return ended + lines
    if status == 'hang':
        return ['no new log line for %ss, and no CPU or disk activity (last: %s)'
                % (p['hang_timeout'], state.tail_lines[-1] if state.lines else 'none')]
    if status == 'timeout':
        return ['not ready after %ss (milestone: %s)' % (p['timeout'], state.milestone)] + lines
    if status == 'unhealthy' and request is not None and request.done:
        return ['ready, but the probe request POST %s failed: %s' % (request.path, request.result['detail'])] + lines
    if status == 'unhealthy':
        last = probe.last
        return ['ready line seen but %s answered %s' % (
            p['health_path'], (last.status or last.error) if last is not None else 'nothing')] + lines
    return lines


def result(p, res, state, watch, log, probe, request):
    """The module's result (see its RETURN)."""
    sig = res.get('signal')
    return dict(
        changed=False,
        status=res['status'],
        reason=res['reason'],
        evidence=evidence(p, res, state, watch, probe, request),
        log_tail=state.tail(),
        milestone=state.milestone,
        milestone_detail=state.milestone_detail,
        milestone_line=state.milestone_line,
        elapsed=res['elapsed'],
        seconds=res['seconds'],
        signal=sig,
        signal_name=signal_name(sig) if sig is not None else None,
        exit_code=res['exit_code'],
        log_said_anything=state.lines > 0,
        cursor=log.cursor() if log is not None else p['cursor'],
        pid=getattr(watch, 'pid', 0) or 0,
        health_status=probe.last.status if probe.last is not None else None,
        probe=request.result if request is not None else None,
        child_exit=state.child_exit or res.get('rank_death'),
    )


def run(module):
    """The await_server_ready module on its parsed options: wait, then exit_json with the verdict."""
    p = dict(module.params)
    redact.guard(module)
    p.update(TIMING)
    extra_fatal, extra_telling = check_params(module, p)
    unit = unit_name(p['service_name'])
    watch = make_watch(module, p, unit)
    log = open_log(module, p, unit, watch)
    state = sglang_log.LogState(tail_size=p['tail_lines'], extra_fatal=extra_fatal, extra_telling=extra_telling)
    url = sghttp.base_url(p['host'], p['port'], p['scheme']) + p['health_path']
    probe = HealthProbe(url, p['api_key'], p['health_request_timeout'], p['validate_certs'])
    request = make_request(module, p)
    try:
        res = wait(p, watch, log, probe, state, check_mode=module.check_mode, request=request,
                   tree=make_tree(p, watch))
    finally:
        if log is not None:
            log.close()
    out = result(p, res, state, watch, log, probe, request)
    if unit:
        out['unit'] = watch.summary()
    module.exit_json(**out)


# --------------------------------------------------------------------------- work watched as the wait's request
# what a watched work's wait ends with when the work itself decides: the server answered it (ready), it lost the
# server but nothing in the log or the process says why yet (unhealthy), or it ran past its bound (timeout)
WORK_UNDECIDED = ('ready', 'unhealthy', 'timeout', 'loading')


class Healthy(object):
    """The health check of a server already judged ready: while a watched work runs, its process, its ranks and its
    log decide, and no request of the watch's own is sent (it would add load to the work's requests)."""
    ok = True
    last = None

    def kick(self, now):
        return None

    def busy(self):
        return False


class WorkRequest(InThread):
    """``work()`` run in a thread as the wait's request, so that the wait watches the server meanwhile.

    ``lost(value)``: whether the work's return value may mean it lost the server (then the wait gives a death or a
    fatal line ``probe_grace`` seconds to show). An exception in the work is kept in ``error``."""

    path = '(watched work)'
    name = 'work'

    def __init__(self, work, lost):
        self.work = work
        self.lost = lost
        self.value = None
        self.error = None

    def _run(self):
        try:
            self.value = self.work()
            lost = bool(self.lost(self.value))
        except Exception as e:  # pylint: disable=broad-except  # handed back to the caller's thread
            self.error, lost = e, True
        self.result = {'ok': not lost, 'detail': 'the server may be lost' if lost else 'answered'}


def watch_options(options):
    """await_server_ready's options, its defaults under ``options`` (``service_name``, ``cursor``, the endpoint's),
    for a server that already runs (no ready line required)."""
    p = dict((k, spec.get('default')) for k, spec in argument_spec().items())
    p.update(options)
    p.update(TIMING)
    p['require_ready_line'] = False
    return p


def watch_work(module, options, work, lost):
    """Run ``work()`` while watching the server as await_server_ready does: its unit's process, its ranks and its log.

    ``options``: await_server_ready's options (``service_name`` at least; ``timeout`` bounds the watch). Returns
    ``(value, verdict)``: the work's return value (None when the server failed before the work returned) and, when
    the server died or logged a fatal line during the work (or within ``probe_grace`` after a work that may have lost
    it), await_server_ready's result for that (``status`` crashed, killed, oom, nan...; with ``unit``), else None.
    A request still in flight when the server is seen failing is not waited for."""
    p = watch_options(options)
    extra_fatal, extra_telling = check_params(module, p)
    unit = unit_name(p['service_name'])
    watch = make_watch(module, p, unit)
    log = open_log(module, p, unit, watch)
    state = sglang_log.LogState(tail_size=p['tail_lines'], extra_fatal=extra_fatal, extra_telling=extra_telling)
    probe = Healthy()
    request = WorkRequest(work, lost)
    try:
        res = wait(p, watch, log, probe, state, request=request, tree=make_tree(p, watch))
    finally:
        if log is not None:
            log.close()
    if res['status'] in WORK_UNDECIDED:
        if request.thread is not None:
            request.thread.join()
        if request.error is not None:
            raise request.error
        return request.value, None
    verdict = result(p, res, state, watch, log, probe, request)
    if unit:
        verdict['unit'] = watch.summary()
    return (request.value if request.done else None), verdict


REQUIRED_ONE_OF = [('service_name', 'log_path')]


def argument_spec():
    """The await_server_ready module's options (its DOCUMENTATION describes them)."""
    return dict(
        _specs.endpoint_argument_spec(tls=True),
        redact_values=redact.argument_spec()['redact_values'],
        service_name=dict(type='str'),
        log_path=dict(type='path'),
        pid=dict(type='int'),
        health_path=dict(type='str', default='/health_generate'),
        health_request_timeout=dict(type='float', default=25),
        require_ready_line=dict(type='bool', default=True),
        timeout=dict(type='float', default=1800),
        hang_timeout=dict(type='float', default=600),
        unhealthy_timeout=dict(type='float', default=60),
        step=dict(type='float', default=0),
        progress=dict(type='float', default=0),
        progress_label=dict(type='str'),
        group=dict(type='dict'),
        cursor=dict(type='str'),
        since=dict(type='str'),
        start_time=dict(type='float'),
        poll_interval=dict(type='float', default=0.1),
        journal_mode=dict(type='str', default='follow', choices=['follow', 'poll']),
        fatal_patterns=dict(type='list', elements='raw', default=[]),
        telling_patterns=dict(type='list', elements='str', default=[]),
        tail_lines=dict(type='int', default=40),
        probe=dict(type='dict', options=dict(
            endpoint=dict(type='str', default='/generate'),
            prompt=dict(type='str', default='The capital city of France is'),
            max_tokens=dict(type='int', default=8, no_log=False),
            model=dict(type='str'),
            timeout=dict(type='float', default=60),
        )),
    )
