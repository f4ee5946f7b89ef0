# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classify SGLang server log lines.

Pure functions over lists of lines, plus :class:`LogState`, an incremental
state object for streaming use (feed it lines as they arrive).

What the lines look like is documented in the collection's reference notes
(SGLang's ``launch_server``): start-up milestones, the ready line, the markers
SGLang writes when a worker dies, and Python tracebacks from which we pick the
first *telling* line (the one an engineer would quote in a bug report).

Only the standard library is used; works on Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re
import signal as signal_mod

READY_LINE = 'The server is fired up and ready to roll!'
# Multi-node: a rank other than 0 serves no API and never logs READY_LINE; when its schedulers are ready it starts a
# dummy health server and logs this instead (rank 0 and a single host never do), so either line means "ready".
# 0.5.23 (srt/utils/common.py:3684): "Dummy health check server started in background thread at HOST:PORT", seen
# in the real two-node group's journal (tests/realserver); older releases only, never 0.5.23: "Starting dummy health
# check server at HOST:PORT", "Dummy health check server scheduled ..." (their srt/utils.py
# run_dummy_health_check_server); kept beside the 0.5.23 line so that a member on such a release is seen ready too.
MEMBER_READY_LINES = ('Dummy health check server started in background thread at',
                      'Starting dummy health check server at', 'Dummy health check server scheduled')

# Start-up milestones, in the order SGLang reaches them.  name -> regex.  Each matches the line of 0.5.23 and
# the one of older releases:
#   init_parallel     "Init parallel begin." (0.5.23, srt/distributed/bootstrap.py:115; in the real server's journal,
#                     tests/realserver/test_differential.py) / "Init torch distributed begin." (older releases only: their
#                     model_runner.py init_torch_distributed; never 0.5.23)
#   loading_shards    "Multi-thread loading shards: 50% ..." (0.5.23, srt/model_loader/weight_utils.py:1369-1371) /
#                     "Loading safetensors checkpoint shards: 50% ..." (older releases)
#   cuda_graph_begin  "Capture target decode CUDA graph begin. backend=..., num_tokens_per_req=..." (0.5.23,
#                     srt/model_executor/model_runner_components/cuda_graph_setup.py:758-762; "target prefill" at
#                     :684-688, "draft decode" in speculative/eagle_worker_v2.py:513-517, ...; the lab's real server
#                     runs on the CPU without CUDA graphs, so only the wheel's source shows it) / "Capture cuda graph
#                     begin." (older releases only); cuda_graph: "... end."
#   engine_up         "Engine startup timings (s): ..." (0.5.23: every scheduler is up, before the HTTP server)
# Not milestones: "Cuda graph is disabled because ...", "Disable prefill CUDA graph because ..." (no "Capture").
MILESTONES = (
    ('init_parallel', re.compile(r'Init (?:parallel|torch distributed) begin')),
    ('load_begin', re.compile(r'Load weight begin')),
    ('loading_shards', re.compile(r'(?:Loading (?:safetensors|pt|np_cache) checkpoint shards'
                                  r'|Multi-thread loading (?:pt checkpoint )?shards):\s*(\d+)%')),
    ('load_end', re.compile(r'Load weight end\.')),
    ('kv_cache', re.compile(r'KV Cache is allocated')),
    ('cuda_graph_begin', re.compile(r'\bCapture (?:[\w-]+ ){0,4}?cuda graph begin\b', re.I)),
    ('cuda_graph', re.compile(r'\bCapture (?:[\w-]+ ){0,4}?cuda graph end\b', re.I)),
    ('engine_up', re.compile(r'Engine startup timings \(s\)')),
    ('http_up', re.compile(r'Uvicorn running on')),
    ('ready', re.compile('|'.join(re.escape(t) for t in (READY_LINE,) + MEMBER_READY_LINES))),
)
MILESTONE_ORDER = tuple(name for name, _rx in MILESTONES)

# Fatal markers: (reason, regex).  Reasons use the collection's contract names.
FATAL_PATTERNS = (
    # GPU memory: torch's OOM; the KV cache that does not fit (older: "Not enough memory", 0.5.23
    # mem_cache/kv_cache_configurator.py: "Loaded weights leave no GPU memory for the KV cache under
    # --mem-fraction-static=..."); stale holders on some GPUs (0.5.23 distributed/bootstrap.py raises
    # "RuntimeError: The memory capacity is unbalanced. ..."; with SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 the
    # same text is only a warning and the start goes on, so only the exception counts).
    ('oom', re.compile(r'CUDA out of memory|OutOfMemoryError|CUDA error: out of memory'
                       r'|Not enough memory\. Please try to increase --mem-fraction-static'
                       r'|Loaded weights leave no GPU memory for the KV cache'
                       r'|RuntimeError: The memory capacity is unbalanced', re.I)),
    # the host's OOM killer, when its record is in this log (kernel, or systemd's line about the unit); never
    # SGLang's own hint "a common cause is the OS OOM killer" (case-sensitive on purpose)
    ('oom', re.compile(r'\bOut of memory: Killed process \d+|\bMemory cgroup out of memory: Killed process'
                       r'|\boom-kill:constraint=|\binvoked oom-killer\b|has been killed by the OOM killer')),
    # NaN: 0.5.23 with SGLANG_ENABLE_NAN_LOGITS_CHECK: the device assert "NaN detected! sampler: next_token_logits"
    # (srt/utils/async_probe.py:129), with SGLANG_SANITIZE_NAN_LOGITS: "NaN detected in sampler: next_token_logits;
    # values were sanitized ..." (async_probe.py:41); older releases only, never 0.5.23: "Detected errors during
    # sampling! NaN in the logits." (sampler.py)
    ('nan', re.compile(r'probability tensor contains either .?inf.?, .?nan.?'
                       r'|NaN in the logits|\bNaN detected\b'
                       r'|\bnan\b[^\n]{0,40}\bdetected\b|\bdetected\b[^\n]{0,40}\bnan\b'
                       r'|(?:Error|Exception)\b[^\n]*\b(?:contains?|produced|got|found)\b[^\n]{0,20}\b(?:NaN|nan|inf)s?\b')),
    # "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"; a soft watchdog
    # (--soft-watchdog-timeout, "self.soft=True") only dumps debug info and the server goes on
    ('hang', re.compile(r'watchdog timeout(?![^\n]*\bsoft=True\b)', re.I)),
    ('crashed', re.compile(r'Scheduler hit an exception|\b\w+Manager hit an exception|\b\w+ hit an exception'
                           r'|Received sigquit from a child process|SIGQUIT received'
                           r'|Initialization failed\. warmup error|Rank \d+ scheduler is dead'
                           # a child's death in 0.5.23 (utils/watchdog.py:217, in the real server's journal): see
                           # CHILD_EXIT_PATTERNS
                           # uvicorn cannot listen (0.5.23 goes on to a warm-up that fails 2 minutes later)
                           r'|error while attempting to bind on address')),
    ('unhealthy', re.compile(r'Health check failed')),
)
# When several markers are seen, the most specific wins.  ``killed`` (a child process ended by SIGKILL/SIGTERM,
# see CHILD_EXIT_PATTERNS) ranks above ``crashed`` so that the SIGQUIT lines which follow it do not override it.
REASON_PRIORITY = ('oom', 'nan', 'hang', 'killed', 'crashed', 'unhealthy')

# A child process (scheduler, detokenizer) that died, with its exit code (multiprocessing's: -N = signal N):
#   0.5.23 utils/watchdog.py, while serving (the main process lives on ~7 s, then ends by SIGKILL):
#     "Subprocess scheduler_0 (pid=18252) crashed with exit code -9. Triggering SIGQUIT for cleanup..."
#   0.5.23 entrypoints/engine.py, during the launch (the main process then exits with status 1):
#     "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL),
#      a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
#   0.5.23 entrypoints/engine.py, a multi-node rank >= 1 (the node then exits 0; "terminated with 0" is a stop):
#     "Scheduler or DataParallelController 24020 terminated with -9"
CHILD_EXIT_PATTERNS = (
    re.compile(r'Subprocess (?P<name>\S+) \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+|None)'),
    re.compile(r'Rank (?P<rank>\d+) scheduler died during initialization \(exit code: (?P<code>-?\d+|None)\)'),
    re.compile(r'Scheduler or DataParallelController (?P<pid>\d+) terminated with (?P<code>-?\d+|None)\b'),
)
# signals that end a process from outside (the OOM killer, kill -9, a stop): ``killed``; any other signal
# (SIGSEGV -11, SIGABRT -6, ...) or a non-zero exit status is a crash
KILL_SIGNALS = (9, 15)

# Lines inside a traceback that say *why*, strongest first.  Each entry: (rank, regex).  FlashInfer 0.7.2's
# trtllm-gen MoE on a GPU it has no cubins for (csrc/trtllm_batched_gemm_runner.cu): "RuntimeError: Error in function
# 'TrtllmGenBatchedGemmRunner' at ...: The trtllm-gen batched GEMM cubin manifest contains no kernels runnable on sm120;
# ...".
TELLING_PATTERNS = (
    (0, re.compile(r'requires \d+(?:\.\w+)? arch|requires (?:an? )?(?:SM|sm)_?\d+|\bnot supported on\b'
                   r'|contains no kernels runnable on sm\d+'
                   r'|no kernel image is available|[Uu]nsupported (?:GPU |CUDA )?arch|unsupported (?:sm|SM)\d*'
                   r'|illegal memory access|CUDA error|CUBLAS_STATUS|cuDNN error|NCCL error'
                   r'|CUDA out of memory|OutOfMemoryError|probability tensor contains|\bNaN detected\b')),
    (1, re.compile(r'trtllm_fp4_block_scale_moe|trtllm_\w+_moe|cutlass_fused_moe|cutedsl|trtllm_gen|fp4_gemm'
                   r'|\bmoe_runner\b|flashinfer\.\w*moe')),
)

# "RuntimeError: boom", "torch.OutOfMemoryError: ...", "AssertionError", "KeyboardInterrupt"
EXCEPTION_LINE = re.compile(
    r'^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?::\s.*|:?\s*)$')
TRACEBACK_START = re.compile(r'Traceback \(most recent call last\)')
FRAME_LINE = re.compile(r'^\s*File "[^"]*", line \d+')
# SGLang's own prefix: "[2026-05-01 12:00:00 TP3] " (also "[2026-05-01 12:00:00] ").
LOG_PREFIX = re.compile(r'^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]\s?')
SHARDS_DETAIL = re.compile(r'(\d+)%[^|]*\|(?:[^|]*\|)?\s*(\d+)/(\d+)')


def strip_prefix(line):
    """Return the message without SGLang's ``[date time TPn]`` prefix."""
    return LOG_PREFIX.sub('', line, count=1)


def split_lines(text):
    """Split raw log output into lines; tqdm's carriage-return updates become lines too."""
    out = []
    for line in text.replace('\r\n', '\n').split('\n'):
        for part in line.split('\r'):
            if part.strip():
                out.append(part.rstrip())
    return out


def milestone_of(line):
    """Return ``(name, detail)`` for a milestone line, else ``(None, None)``."""
    for name, rx in MILESTONES:
        m = rx.search(line)
        if m:
            detail = None
            if name == 'loading_shards':
                d = SHARDS_DETAIL.search(line)
                detail = '%s%% (%s/%s)' % d.groups() if d else '%s%%' % m.group(1)
            return name, detail
    return None, None


def signal_name(num):
    """``9`` -> ``KILL`` (as await_server_ready names signals); the number as text when unknown."""
    try:
        return signal_mod.Signals(num).name.replace('SIG', '')
    except (ValueError, AttributeError):
        return str(num)


def child_exit_of(line):
    """A line that says a child process (scheduler, detokenizer) died -> its facts, else None.

    Returns ``{name, pid, exit_code, signal, signal_name, reason, line}``: ``exit_code`` as logged (multiprocessing's
    ``-N`` for "ended by signal N", None when SGLang logged ``None``), ``signal`` N or None, ``reason`` ``killed``
    (SIGKILL, SIGTERM) or ``crashed`` (any other signal, a non-zero status, unknown). A child that ended with 0
    (a member node's scheduler after a stop) is no death: None.
    """
    for rx in CHILD_EXIT_PATTERNS:
        m = rx.search(line)
        if not m:
            continue
        groups = m.groupdict()
        code = None if groups['code'] == 'None' else int(groups['code'])
        if code == 0:
            return None
        if groups.get('name'):
            name = groups['name']
        elif groups.get('rank') is not None:
            name = 'scheduler_%s' % groups['rank']
        else:
            name = 'scheduler'
        sig = -code if code is not None and code < 0 else None
        return {
            'name': name,
            'pid': int(groups['pid']) if groups.get('pid') else None,
            'exit_code': code,
            'signal': sig,
            'signal_name': signal_name(sig) if sig is not None else None,
            'reason': 'killed' if sig in KILL_SIGNALS else 'crashed',
            'line': line.strip(),
        }
    return None


def fatal_of(line, extra=()):
    """Return the contract reason for a fatal line (``oom``, ``nan``, ``hang``, ``crashed``, ``unhealthy``) or None.

    ``extra`` is a list of ``(reason, compiled_regex)`` checked after the built-in ones.
    """
    for reason, rx in tuple(FATAL_PATTERNS) + tuple(extra):
        if rx.search(line):
            return reason
    return None


def telling_rank(line, extra=()):
    """Rank of a line as evidence: 0 strongest, None when not telling."""
    for rank, rx in tuple(TELLING_PATTERNS) + tuple(extra):
        if rx.search(line):
            return rank
    return None


def is_exception_line(line):
    msg = strip_prefix(line).strip()
    if not msg or FRAME_LINE.match(msg):
        return False
    return bool(EXCEPTION_LINE.match(msg))


def classify_line(line, extra_fatal=()):
    """Classify one line.

    Returns a dict ``{kind, name, reason, detail, child}`` where ``kind`` is one of
    ``ready``, ``milestone``, ``fatal``, ``traceback``, ``exception``, ``other``; ``child`` is
    :func:`child_exit_of`'s dict for a line that says a child process died (``kind`` ``fatal``), else None.
    A fatal marker of its own (``CUDA out of memory``, ...) wins over the child's exit for ``reason``.
    """
    reason = fatal_of(line, extra_fatal)
    child = child_exit_of(line)
    if reason or child:
        detail = None
        if child:
            detail = '%s exit code %s' % (child['name'], child['exit_code'])
        return {'kind': 'fatal', 'name': None, 'reason': reason or child['reason'], 'detail': detail,
                'child': child}
    name, detail = milestone_of(line)
    if name == 'ready':
        return {'kind': 'ready', 'name': name, 'reason': None, 'detail': None, 'child': None}
    if name:
        return {'kind': 'milestone', 'name': name, 'reason': None, 'detail': detail, 'child': None}
    if TRACEBACK_START.search(line):
        return {'kind': 'traceback', 'name': None, 'reason': None, 'detail': None, 'child': None}
    if is_exception_line(line):
        return {'kind': 'exception', 'name': None, 'reason': None, 'detail': None, 'child': None}
    return {'kind': 'other', 'name': None, 'reason': None, 'detail': None, 'child': None}


class LogState(object):
    """Incremental classification of a log stream.

    Feed lines with :meth:`feed` (one line) or :meth:`feed_text` (raw output);
    read ``ready``, ``milestone``, ``reason`` (fatal reason or None), ``child_exit`` (the first child process
    that died, :func:`child_exit_of`), :meth:`evidence` and :meth:`tail`.

    A child's death decides the reason at its line, while the main process still lives (0.5.23's main process
    lingers about 7 s after a scheduler died): ``killed`` for SIGKILL/SIGTERM, ``crashed`` for another signal or
    status, the line as first evidence. When something was said before it (a rank's traceback, a watchdog
    timeout, CUDA out of memory), that stays the reason and its evidence: the death is its consequence.
    """

    def __init__(self, tail_size=40, extra_fatal=(), extra_telling=()):
        self.tail_lines = collections.deque(maxlen=tail_size)
        self.extra_fatal = tuple(extra_fatal)
        self.extra_telling = tuple(extra_telling)
        self.lines = 0
        self.ready = False
        self.ready_line = None
        self.milestone = None
        self.milestone_detail = None
        self.milestone_line = None
        self.reason = None
        self.reason_from_child = False     # the reason is a child's death (its line is the first evidence)
        self.child_exit = None
        self.fatal_line = None
        self.fatal_lines = []
        self.in_traceback = False
        self.best_telling = None   # (rank, line)
        self.last_exception = None
        self.exceptions = []

    # -- feeding ---------------------------------------------------------
    def feed_text(self, text):
        events = []
        for line in split_lines(text):
            ev = self.feed(line)
            if ev:
                events.append(ev)
        return events

    def feed_lines(self, lines):
        events = []
        for line in lines:
            for part in split_lines(line):
                ev = self.feed(part)
                if ev:
                    events.append(ev)
        return events

    def feed(self, line):
        """Feed one line; return the classification dict when it is not ``other``, else None."""
        line = line.rstrip('\r\n')
        if not line.strip():
            return None
        self.lines += 1
        self.tail_lines.append(line)
        c = classify_line(line, self.extra_fatal)
        kind = c['kind']
        if kind == 'ready':
            self.ready = True
            self.ready_line = line
            self.milestone = 'ready'
            self.milestone_detail = None
            self.milestone_line = line
        elif kind == 'milestone':
            # never move backwards (a late tqdm line must not undo "kv_cache")
            if self.milestone is None or MILESTONE_ORDER.index(c['name']) >= MILESTONE_ORDER.index(self.milestone):
                self.milestone = c['name']
                self.milestone_detail = c['detail']
                self.milestone_line = line
        elif kind == 'fatal':
            child = c.get('child')
            if child and self.child_exit is None:
                self.child_exit = child
            if child and c['reason'] == child['reason']:
                self._child_fatal(child['reason'], line)
            else:
                self._fatal(c['reason'], line)
            if TRACEBACK_START.search(line):
                self.in_traceback = True
            elif is_exception_line(line):
                # "torch.OutOfMemoryError: ...", "RuntimeError: Rank 0 scheduler died ...": the traceback's end
                self.last_exception = line
                if line not in self.exceptions:
                    self.exceptions.append(line)
                self.in_traceback = False
        elif kind == 'traceback':
            self.in_traceback = True
        elif kind == 'exception':
            self.last_exception = line
            if line not in self.exceptions:
                self.exceptions.append(line)
            self.in_traceback = False
        # telling lines are looked for anywhere once something went wrong or inside a traceback
        if self.in_traceback or kind in ('fatal', 'exception') or self.reason:
            rank = telling_rank(strip_prefix(line), self.extra_telling)
            if rank is not None and (self.best_telling is None or rank < self.best_telling[0]):
                self.best_telling = (rank, line)
        return None if kind == 'other' else c

    def _fatal(self, reason, line):
        if line not in self.fatal_lines and len(self.fatal_lines) < 10:
            self.fatal_lines.append(line)
        if self.reason is None or REASON_PRIORITY.index(reason) < REASON_PRIORITY.index(self.reason):
            self.reason = reason
            self.reason_from_child = False
            self.fatal_line = line

    def _child_fatal(self, reason, line):
        """A child's death: the reason only when nothing (or only ``unhealthy``) was said before."""
        if line not in self.fatal_lines and len(self.fatal_lines) < 10:
            self.fatal_lines.append(line)
        if self.reason in (None, 'unhealthy'):
            self.reason = reason
            self.reason_from_child = True
            self.fatal_line = line

    # -- reading ---------------------------------------------------------
    def telling_line(self):
        """The first strongest telling line, else the last exception line, else the fatal marker.

        When the reason is a child's death, its line ("Subprocess scheduler_0 (pid=N) crashed with exit code -9",
        "Rank 0 scheduler died during initialization (exit code: -9)") comes first.
        """
        if self.reason_from_child and self.fatal_line:
            return self.fatal_line
        if self.best_telling:
            return self.best_telling[1]
        if self.last_exception:
            return self.last_exception
        return self.fatal_line

    def evidence(self, limit=5):
        """Evidence lines, most telling first: telling line, final exception line, fatal marker(s)."""
        out = []
        for line in [self.telling_line(), self.last_exception, self.fatal_line] + list(self.fatal_lines):
            if line and line.strip() not in out:
                out.append(line.strip())
        return out[:limit]

    def tail(self):
        return list(self.tail_lines)

    def to_dict(self):
        return {
            'lines': self.lines,
            'ready': self.ready,
            'milestone': self.milestone,
            'milestone_detail': self.milestone_detail,
            'milestone_line': self.milestone_line,
            'reason': self.reason,
            'evidence': self.evidence(),
            'child_exit': dict(self.child_exit) if self.child_exit else None,
        }


def classify_lines(lines, tail_size=40):
    """Classify a complete list of lines (pure helper): returns :meth:`LogState.to_dict` plus ``tail``."""
    st = LogState(tail_size=tail_size)
    st.feed_lines(lines)
    d = st.to_dict()
    d['tail'] = st.tail()
    return d


def final_reason(log_reason, sig=None, unit_result=None):
    """The verdict from what the log said and how the process ended (or what systemd knows while it lives).

    ``log_reason``: :attr:`LogState.reason`; ``sig``: the signal that ended the watched process, None when it
    exited or still lives; ``unit_result``: systemd's ``Result`` (``oom-kill`` when the OOM killer struck the
    unit). A child killed by SIGKILL (``killed`` from the log) in a unit that systemd marks ``oom-kill`` is
    ``oom``: 0.5.23 ends such a unit with status 1 ("Rank N scheduler died during initialization (exit code: -9)")
    or by its own SIGKILL, so the status alone does not tell. SGLang's hint "a common cause is the OS OOM
    killer" is no evidence by itself.
    """
    if log_reason == 'killed' and unit_result == 'oom-kill':
        return 'oom'
    if log_reason and log_reason != 'unhealthy':
        return log_reason
    if unit_result == 'oom-kill':
        return 'oom'
    if sig is not None:
        return 'killed'
    return 'crashed'


def compile_patterns(patterns, default_reason='crashed'):
    """Compile user patterns (strings, or dicts ``{regex, reason}``) into ``(reason, regex)`` pairs."""
    out = []
    for p in patterns or ():
        if isinstance(p, dict):
            out.append((p.get('reason') or default_reason, re.compile(p['regex'])))
        else:
            out.append((default_reason, re.compile(p)))
    return out
