#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: await_server_ready
short_description: Wait for an SGLang server to be ready, or classify why it failed
version_added: 0.1.0
description:
  - Watches, together, the server's log (the journal of a systemd unit, or a plain log file), its process
    (the unit's main process, or a given PID) and C(GET /health_generate).
  - Returns C(ready) as soon as the ready line C(The server is fired up and ready to roll!) was logged and the health
    endpoint answered 200. A multi-node rank other than 0 never logs that line; its ready line is
    C(Dummy health check server started in background thread at HOST:PORT) (older releases
    C(Starting dummy health check server at HOST:PORT)), and its dummy health endpoint answers 200.
  - Returns a failure status as soon as the process dies or a fatal line appears, within about one second of the event,
    with the most telling line of the traceback as evidence.
  - With O(step), returns C(loading) after at most O(step) seconds with the latest start-up milestone, so that a role can
    call it again (passing back O(cursor)) and print progress.
  - For a systemd unit only the lines of the unit's current invocation are read (journal field C(_SYSTEMD_INVOCATION_ID)),
    so lines of earlier runs never confuse the classification.
  - Changes nothing on the host.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
options:
  service_name:
    description:
      - The systemd unit that runs the server (with or without the C(.service) suffix).
      - Its journal is the log and its main process is the process, unless O(log_path) or O(pid) is given.
      - One of O(service_name) and O(log_path) is required.
    type: str
  log_path:
    description:
      - A plain log file the server writes to, read instead of the journal.
    type: path
  pid:
    description:
      - The server's process ID, watched when there is no O(service_name).
      - Without O(pid) and O(service_name), only the log and the health endpoint are watched.
    type: int
  host:
    description: Address of the server's HTTP endpoint.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the server's HTTP endpoint.
    type: int
    default: 30000
  scheme:
    description: URL scheme of the HTTP endpoint.
    type: str
    choices: [http, https]
    default: http
  validate_certs:
    description: Verify the TLS certificate when O(scheme=https).
    type: bool
    default: true
  api_key:
    description: The server's API key, sent as C(Authorization Bearer).
    type: str
  health_path:
    description: The health endpoint; C(/health_generate) proves a token can be generated.
    type: str
    default: /health_generate
  health_request_timeout:
    description: Seconds one health request may take (SGLang itself answers 503 after 20 s without a token).
    type: float
    default: 25
  require_ready_line:
    description:
      - Wait for the ready line before probing health.
      - Set to V(false) when the log cannot be read; then the first 200 from the health endpoint means ready.
    type: bool
    default: true
  timeout:
    description:
      - Overall bound in seconds, counted from the start of the server (the unit's start, the process's start,
        or O(start_time)); past it the status is C(timeout).
      - With O(require_ready_line=false) (a check of a server that already runs), counted from this call.
    type: float
    default: 1800
  hang_timeout:
    description:
      - Seconds without a new log line, while the process is alive and not ready, and idle, after which the status
        is C(hang).
      - Idle means that the unit's processes used less than 5 % of a CPU core and read less than 1 MiB between two
        samples (its cgroup's C(cpu.stat) and C(io.stat), else the main process's tree in /proc). A silent load
        that works (a tqdm bar with no newline, a JIT compile, imports) is never a hang.
    type: float
    default: 600
  unhealthy_timeout:
    description:
      - Seconds after the ready line within which the health endpoint must answer 200, else C(unhealthy).
      - With O(require_ready_line=false), counted from the ready line or this call, whichever is later.
    type: float
    default: 60
  step:
    description:
      - When greater than 0, return C(loading) after at most this many seconds if nothing was decided yet.
      - Call the module again with the returned O(cursor) to continue.
    type: float
    default: 0
  progress:
    description:
      - When greater than 0, the task waits until a decision, however long the load, and prints a progress line
        (the last milestone and the seconds since the server started) on the controller every O(progress) seconds.
      - The action plugin calls the module again with its RV(cursor) until the status is no longer C(loading). Each
        call waits up to O(step) seconds (default 60; a group's members O(progress) seconds).
    type: float
    default: 0
  progress_label:
    description:
      - What the progress lines name, for example the candidate; default O(service_name).
    type: str
  group:
    description:
      - With O(progress), the serving group this host belongs to (as the P(llmserve.sglang.preflight#role) role
        describes it - C(name), C(head), C(members) with C(host) and C(rank)).
      - The members that wait at the same time share their latest status on the controller, so that a member still
        loading stops as soon as another rank has failed, and a ready member is watched until the group is ready.
    type: dict
  cursor:
    description:
      - The RV(cursor) returned by the previous call, to continue it.
      - Each call reads this run's log again from its start (the journal of the unit's current invocation, or the
        file from O(since)), which is cheap, so the state (milestone, ready line, traceback, hang clock from the lines'
        time stamps) is complete; the wait then goes on from the end.
      - For a journal it is a journal cursor; for a log file C(INODE:OFFSET), and a file whose inode differs
        (rotated since) is read from offset 0.
    type: str
  since:
    description:
      - Where this run's log starts, when it cannot be told otherwise.
      - For a journal without an invocation ID, any C(journalctl --since) value (default the unit's start).
      - For a log file, a byte offset (default 0, or where O(cursor) points after a rotation).
    type: str
  start_time:
    description:
      - When the server started, in seconds since the epoch; used for RV(elapsed) and O(timeout) when neither a unit
        nor a process start time is known.
    type: float
  poll_interval:
    description: Seconds between checks of the process and the log (the journal follow pipe wakes up at once).
    type: float
    default: 0.1
  journal_mode:
    description:
      - V(follow) keeps one C(journalctl -f) running and blocks on its pipe (lowest latency);
        V(poll) runs C(journalctl --after-cursor) every O(poll_interval).
    type: str
    choices: [follow, poll]
    default: follow
  fatal_patterns:
    description:
      - Extra regular expressions that mark a fatal log line, on top of the built-in ones.
      - Each item is a string (reason C(crashed)) or a dict with C(regex) and C(reason).
    type: list
    elements: raw
    default: []
  telling_patterns:
    description: Extra regular expressions for the most telling evidence line of a traceback.
    type: list
    elements: str
    default: []
  tail_lines:
    description: Number of log lines returned in RV(log_tail).
    type: int
    default: 40
  probe:
    description:
      - One request to send once the server is ready, while its process and log are still watched, so that a
        server that dies on its first request is classified (C(crashed), C(killed), ...) by this same call.
      - The status is C(ready) only when the request is answered 200 with a JSON body; the text is not judged
        (the screen's dummy weights give random text). Use M(llmserve.sglang.smoke_generate) to judge text.
      - When the request fails and the process neither dies nor logs a fatal line within about two seconds,
        the status is C(unhealthy) and RV(probe) says how the request failed.
      - Not sent in check mode. Only for a server that serves the API (a multi-node group's rank 0; the other
        ranks answer nothing but their health endpoint).
    type: dict
    suboptions:
      endpoint:
        description: The endpoint, as in M(llmserve.sglang.smoke_generate)'s prompts.
        type: str
        default: /generate
      prompt:
        description: The prompt text.
        type: str
        default: The capital city of France is
      max_tokens:
        description: Tokens to generate.
        type: int
        default: 8
      model:
        description: The served model name, for the OpenAI-style endpoints.
        type: str
      timeout:
        description: Seconds the request may take.
        type: float
        default: 60
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: The action plugin repeats the module's call for O(progress) and prints the progress lines.
  check_mode:
    support: full
    details: Nothing is changed in any mode. In check mode the state is inspected once and returned without waiting.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The server's own crash path (a worker's exception, SIGQUIT to the parent, SIGKILL of the tree) ends with
    signal 9 even when the log says why; the log's reason wins over C(killed) then, and RV(signal) still says 9.
  - C(killed) with RV(log_said_anything=false) usually means the kernel OOM killer or a native crash before any output.
seealso:
  - module: llmserve.sglang.sglang_launch
  - module: llmserve.sglang.smoke_generate
'''

EXAMPLES = r'''
- name: Wait for the trial server, printing progress every 10 s
  llmserve.sglang.await_server_ready:
    service_name: sglang-trial
    port: 30000
    api_key: "{{ sglang_api_key | default(omit) }}"
    timeout: 3600
    hang_timeout: 600
    step: 10
    cursor: "{{ _wait.cursor | default(omit) }}"
  register: _wait
  until: _wait.status != 'loading'
  retries: 400
  delay: 0

- name: Screen a start with dummy weights - ready, then one short request whose text is not judged
  llmserve.sglang.await_server_ready:
    service_name: sglang-trial
    timeout: 300
    probe:
      prompt: The capital city of France is
      max_tokens: 8
  register: _screen

- name: Watch a server started by hand with its output in a file
  llmserve.sglang.await_server_ready:
    log_path: /var/log/sglang.log
    pid: 12345
    timeout: 900
  register: ready
'''

RETURN = r'''
status:
  description: C(ready), C(loading) (only with O(step)), or the failure (same as RV(reason)).
  returned: always
  type: str
  sample: crashed
reason:
  description:
    - Why it failed, one of C(crashed), C(killed), C(oom), C(nan), C(hang), C(timeout), C(unhealthy); null when ready or loading.
  returned: always
  type: str
  sample: crashed
evidence:
  description: The lines that say why, most telling first (the traceback's telling line, the final exception, the fatal marker).
  returned: always
  type: list
  elements: str
  sample:
    - "RuntimeError: trtllm_fp4_block_scale_moe requires 10.x architecture"
    - "[2026-05-01 12:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):"
log_tail:
  description: The last O(tail_lines) lines of this run's log.
  returned: always
  type: list
  elements: str
milestone:
  description:
    - The latest start-up milestone seen, one of C(init_parallel), C(load_begin), C(loading_shards), C(load_end),
      C(kv_cache), C(cuda_graph_begin), C(cuda_graph), C(engine_up), C(http_up), C(ready); null before the first.
  returned: always
  type: str
  sample: loading_shards
milestone_detail:
  description: Detail of the milestone, e.g. the checkpoint shard progress.
  returned: always
  type: str
  sample: 50% (32/64)
milestone_line:
  description: The log line of the latest milestone.
  returned: always
  type: str
elapsed:
  description: Seconds since the server started (unit or process start, or O(start_time); else since this call began).
  returned: always
  type: float
  sample: 184.2
seconds:
  description: Seconds this call took.
  returned: always
  type: float
  sample: 10.0
signal:
  description: The signal number that ended the process, when it ended by a signal and that is known.
  returned: always
  type: int
  sample: 9
signal_name:
  description: The name of RV(signal), e.g. C(KILL).
  returned: always
  type: str
  sample: KILL
exit_code:
  description: The exit status of the process, when it exited normally and that is known.
  returned: always
  type: int
log_said_anything:
  description: Whether this run wrote any log line at all.
  returned: always
  type: bool
cursor:
  description: Where the log was read up to; pass it back as O(cursor) to continue.
  returned: always
  type: str
pid:
  description: The watched process ID (0 when unknown).
  returned: always
  type: int
health_status:
  description: The last HTTP status of the health endpoint (null when not probed or no answer).
  returned: always
  type: int
probe:
  description:
    - The request of O(probe) - C(ok), C(reason) (C(http_error) or C(timeout) when it failed), C(detail), C(status),
      C(seconds), C(text); null when O(probe) is not set or the request was not sent (not ready, check mode).
  returned: always
  type: dict
  sample: {ok: true, reason: null, detail: null, status: 200, seconds: 0.21, text: " Paris"}
child_exit:
  description:
    - The first child process (scheduler, detokenizer) the log says died - C(name) (C(scheduler_0)), C(pid), C(exit_code)
      (as SGLang logs it, C(-9) for SIGKILL), C(signal), C(signal_name), C(reason), C(line); null when none did.
    - A scheduler that dies while the main process still lives is decided at that line (C(killed) for SIGKILL or
      SIGTERM, C(oom) when systemd marks the unit C(Result=oom-kill), else C(crashed)) unless a traceback or another
      marker said why before; RV(signal) and RV(exit_code) are the main process's and stay null then.
  returned: always
  type: dict
  sample: {name: scheduler_0, pid: 18252, exit_code: -9, signal: 9, signal_name: KILL, reason: killed}
unit:
  description: The unit's state from systemd (C(ActiveState), C(SubState), C(Result), C(InvocationID), ...), when O(service_name) is set.
  returned: when O(service_name) is set
  type: dict
'''

import os
import signal as signal_mod
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import activity
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.plugins.module_utils.logsource import FileLog, JournalLog
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http as sghttp
from ansible_collections.llmserve.sglang.plugins.module_utils import smoke

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
TIMING = {'fatal_grace': 0.5, 'fatal_quiet': 0.15, 'drain_min': 0.15, 'drain_max': 0.8, 'traceback_grace': 1.5,
          'probe_grace': 2.0}

CLD_EXITED = 1
CLD_KILLED = 2
CLD_DUMPED = 3


def signal_name(num):
    try:
        return signal_mod.Signals(num).name.replace('SIG', '')
    except (ValueError, AttributeError):
        return str(num)


def parse_show(text):
    out = {}
    for line in (text or '').splitlines():
        if '=' in line:
            k, v = line.split('=', 1)
            out[k.strip()] = v.strip()
    return out


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
        self.props = parse_show(out)
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

    def _run(self):
        r = sghttp.get(self.url, api_key=self.api_key, timeout=self.timeout, validate_certs=self.validate_certs)
        self.last = r
        if r.status == 200:
            self.ok = True
        self.next_at = time.time() + self.interval


class RequestProbe(object):
    """The one request of O(probe), sent in a thread once the server is ready, so the wait keeps watching."""

    def __init__(self, base, spec, api_key, validate_certs, post=sghttp.post_json):
        self.prompt = smoke.normalize_prompt(dict(spec, name='probe'))
        self.path, self.body = smoke.build_request(self.prompt, model=spec.get('model'))
        self.url = base + self.path
        self.api_key = api_key
        self.timeout = spec['timeout']
        self.validate_certs = validate_certs
        self.post = post
        self.result = None      # the check dict (smoke.check_response, text not judged) once answered
        self.thread = None

    @property
    def done(self):
        return self.result is not None

    def kick(self):
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name='probe')
            self.thread.daemon = True
            self.thread.start()

    def _run(self):
        r = self.post(self.url, self.body, api_key=self.api_key, timeout=self.timeout,
                      validate_certs=self.validate_certs)
        self.result = smoke.check_response(self.prompt, r.status, r.body, seconds=round(r.seconds, 3),
                                           error=r.error, judge=False)


# --------------------------------------------------------------------------- the wait
def wait(module, p, watch, log, probe, state, check_mode=False, clock=time.time, request=None):
    t_call = clock()
    mono_start = watch.started_monotonic() if hasattr(watch, 'started_monotonic') else None
    if mono_start is not None:
        t_server = t_call - (time.monotonic() - mono_start)
    elif p['start_time']:
        t_server = p['start_time']
    elif getattr(watch, 'pid', 0) and proc_elapsed(watch.pid) is not None:
        t_server = t_call - proc_elapsed(watch.pid)
    else:
        t_server = t_call
    # a server that already runs may have logged nothing for hours: its hang clock starts with this call
    last_activity = t_server if p['require_ready_line'] else t_call
    ready_at = None
    fatal_at = None
    dead_at = None
    line_at = None
    failed_at = None        # when the probe request failed
    res = {'status': 'loading', 'reason': None, 'signal': None, 'exit_code': None}
    # silence is a hang only while the server is also idle (no CPU, no reads): loads and compiles can be silent
    work = activity.Activity(getattr(watch, 'usage', lambda: None))

    while True:
        now = clock()
        # once something fatal was seen, look more often: the verdict is a few reads away
        interval = p['poll_interval'] if fatal_at is None and dead_at is None else min(p['poll_interval'], 0.05)
        lines = log.poll(interval) if log is not None else []
        if log is None and not check_mode:
            time.sleep(interval)
        now = clock()
        if lines:
            line_at = now
            last_activity = max(last_activity, max(ts if ts is not None else now for _l, ts in lines))
            for line, ts in lines:
                had_ready = state.ready
                state.feed(line)
                if state.ready and not had_ready:
                    ready_at = ts if ts is not None else now
                    if not p['require_ready_line']:
                        # a server that already runs logged its ready line long ago: its health gets
                        # unhealthy_timeout from this call
                        ready_at = max(ready_at, t_call)
        if state.reason and fatal_at is None:
            fatal_at = now
        # the process
        if dead_at is None and watch.dead(now):
            dead_at = now
            if (not state.reason or state.in_traceback) and hasattr(log, 'sync'):
                # nothing fatal seen yet, or a traceback without its last line: let journald catch up before
                # calling it a silent kill or taking a traceback's first lines as its evidence
                log.sync()
        if dead_at is not None:
            # drain what the dying process still wrote (journal may lag a little), then decide; a traceback still
            # open (no exception line yet) gets up to drain_max
            drained = not lines and now - dead_at >= p['drain_min'] and not state.in_traceback
            if drained or now - dead_at > p['drain_max'] or check_mode:
                sig, code, result = watch.exit_info()
                res['signal'], res['exit_code'] = sig, code
                reason = sglang_log.final_reason(state.reason, sig, result)
                res.update(status=reason, reason=reason)
                break
            continue
        if fatal_at is not None and state.reason != 'unhealthy':
            # keep reading the traceback for a moment; the process usually dies within it
            # (a traceback without its exception line yet is not done: a loaded host's journald can pause mid-way)
            quiet = (now - max(fatal_at, line_at or fatal_at) >= p.get('fatal_quiet', p['fatal_grace'])
                     and not state.in_traceback)
            grace = p.get('traceback_grace', p['fatal_grace']) if state.in_traceback else p['fatal_grace']
            if quiet or now - fatal_at >= grace or check_mode:
                reason = state.reason
                if reason == 'killed' and hasattr(watch, 'exit_info'):
                    # a child's SIGKILL while the main process lives: systemd's Result=oom-kill makes it oom
                    if hasattr(watch, 'refresh'):
                        watch.refresh()
                    reason = sglang_log.final_reason(reason, unit_result=watch.exit_info()[2])
                res.update(status=reason, reason=reason)
                break
            continue
        # readiness
        if state.ready or not p['require_ready_line']:
            if ready_at is None:
                ready_at = now
            probe.kick(now)
            if probe.ok and (request is None or check_mode):
                res.update(status='ready', reason=None)
                break
            if probe.ok:
                # ready: now the one request, still watching the process and the log (checked above)
                request.kick()
                if request.done and request.result['ok']:
                    res.update(status='ready', reason=None)
                    break
                if request.done:
                    failed_at = failed_at or now
                    if now - failed_at >= p['probe_grace']:
                        res.update(status='unhealthy', reason='unhealthy')
                        break
            elif now - ready_at > p['unhealthy_timeout'] or (state.reason == 'unhealthy' and now - ready_at > 5):
                res.update(status='unhealthy', reason='unhealthy')
                break
        elif work.poll(now):
            last_activity = max(last_activity, now)
        elif now - last_activity > p['hang_timeout'] and work.judged():
            res.update(status='hang', reason='hang')
            break
        # a start-up is bounded from the server's start; a check of a server that already runs (no ready line
        # required) is bounded from this call, however long the server has been up
        t_deadline = t_server if p['require_ready_line'] else t_call
        if now - t_deadline >= p['timeout']:
            res.update(status='timeout', reason='timeout')
            break
        # (a call with a probe request in flight waits for its answer)
        if check_mode or (p['step'] and now - t_call >= p['step'] and (request is None or request.thread is None)):
            break
    now = clock()
    res['elapsed'] = round(now - t_server, 3)
    res['seconds'] = round(now - t_call, 3)
    return res


def main():
    module = AnsibleModule(
        argument_spec=dict(
            redact.argument_spec(),
            service_name=dict(type='str'),
            log_path=dict(type='path'),
            pid=dict(type='int'),
            host=dict(type='str', default='127.0.0.1'),
            port=dict(type='int', default=30000),
            scheme=dict(type='str', default='http', choices=['http', 'https']),
            validate_certs=dict(type='bool', default=True),
            api_key=dict(type='str', no_log=True),
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
        ),
        required_one_of=[('service_name', 'log_path')],
        supports_check_mode=True,
    )
    p = dict(module.params)
    redact.guard(module)
    p.update(TIMING)
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
    for _reason, _rx in extra_fatal:
        if _reason not in sglang_log.REASON_PRIORITY:
            module.fail_json(msg='fatal_patterns: reason must be one of %s, got %r'
                             % (', '.join(sglang_log.REASON_PRIORITY), _reason))

    unit = p['service_name']
    if unit and not unit.endswith(('.service', '.scope')):
        unit += '.service'
    watch = NoWatch()
    if unit:
        watch = UnitWatch(module, unit, module.get_bin_path('systemctl', required=True))
    elif p['pid']:
        watch = PidWatch(p['pid'])

    if p['log_path']:
        try:
            log = FileLog(p['log_path'], cursor=p['cursor'], since=p['since'])
        except ValueError as e:
            module.fail_json(msg=str(e))
    else:
        journalctl = module.get_bin_path('journalctl', required=True)
        since = p['since']
        if not since and not watch.invocation and watch.props.get('ExecMainStartTimestamp'):
            since = watch.props['ExecMainStartTimestamp']
        mode = 'poll' if module.check_mode else p['journal_mode']
        log = JournalLog(module.run_command, journalctl, unit, watch.invocation, since=since, mode=mode)

    state = sglang_log.LogState(tail_size=p['tail_lines'], extra_fatal=extra_fatal, extra_telling=extra_telling)
    url = sghttp.base_url(p['host'], p['port'], p['scheme']) + p['health_path']
    probe = HealthProbe(url, p['api_key'], p['health_request_timeout'], p['validate_certs'])
    request = None
    if p['probe'] is not None:
        if p['probe']['timeout'] <= 0 or p['probe']['max_tokens'] <= 0:
            module.fail_json(msg='probe: timeout and max_tokens must be greater than 0, got %s and %s'
                             % (p['probe']['timeout'], p['probe']['max_tokens']))
        request = RequestProbe(sghttp.base_url(p['host'], p['port'], p['scheme']), p['probe'], p['api_key'],
                               p['validate_certs'])
    try:
        res = wait(module, p, watch, log, probe, state, check_mode=module.check_mode, request=request)
    finally:
        if log is not None:
            log.close()

    sig = res.get('signal')
    evidence = state.evidence()
    if res['status'] in ('killed', 'crashed') and not state.reason:
        if sig is not None:
            how = 'signal %s/%s' % (sig, signal_name(sig))
        elif res['exit_code'] is not None:
            how = 'exit status %s' % res['exit_code']
        else:
            how = 'exit status unknown'
        empty = '' if state.lines else '; the log is empty'
        evidence = ['process %s ended (%s)%s' % (watch.pid or '?', how, empty)] + evidence
    elif res['status'] == 'hang':
        evidence = ['no new log line for %ss, and no CPU or disk activity (last: %s)'
                    % (p['hang_timeout'], state.tail_lines[-1] if state.lines else 'none')]
    elif res['status'] == 'timeout':
        evidence = ['not ready after %ss (milestone: %s)' % (p['timeout'], state.milestone)] + evidence
    elif res['status'] == 'unhealthy' and request is not None and request.done:
        evidence = ['ready, but the probe request POST %s failed: %s' % (request.path, request.result['detail'])] + evidence
    elif res['status'] == 'unhealthy':
        last = probe.last
        evidence = ['ready line seen but %s answered %s' % (
            p['health_path'], (last.status or last.error) if last is not None else 'nothing')] + evidence
    health = probe.last.status if probe.last is not None else None
    result = dict(
        changed=False,
        status=res['status'],
        reason=res['reason'],
        evidence=evidence,
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
        health_status=health,
        probe=request.result if request is not None else None,
        child_exit=state.child_exit,
    )
    if unit:
        result['unit'] = watch.summary()
    module.exit_json(**result)


if __name__ == '__main__':
    main()
