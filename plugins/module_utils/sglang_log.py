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

READY_LINE = 'The server is fired up and ready to roll!'
# Multi-node: a rank other than 0 serves no API and never logs READY_LINE; when its schedulers are ready it starts a
# dummy health server and logs this instead (rank 0 and a single host never do), so either line means "ready".
MEMBER_READY_LINES = ('Starting dummy health check server at', 'Dummy health check server scheduled')

# Start-up milestones, in the order SGLang reaches them.  name -> regex.
MILESTONES = (
    ('load_begin', re.compile(r'Load weight begin')),
    ('loading_shards', re.compile(r'Loading (?:safetensors|pt) checkpoint shards:\s*(\d+)%')),
    ('load_end', re.compile(r'Load weight end\.')),
    ('kv_cache', re.compile(r'KV Cache is allocated')),
    ('cuda_graph_begin', re.compile(r'Capture cuda graph begin')),
    ('cuda_graph', re.compile(r'Capture cuda graph end')),
    ('http_up', re.compile(r'Uvicorn running on')),
    ('ready', re.compile('|'.join(re.escape(t) for t in (READY_LINE,) + MEMBER_READY_LINES))),
)
MILESTONE_ORDER = tuple(name for name, _rx in MILESTONES)

# Fatal markers: (reason, regex).  Reasons use the collection's contract names.
FATAL_PATTERNS = (
    ('oom', re.compile(r'CUDA out of memory|OutOfMemoryError|CUDA error: out of memory'
                       r'|Not enough memory\. Please try to increase --mem-fraction-static', re.I)),
    ('nan', re.compile(r'probability tensor contains either .?inf.?, .?nan.?'
                       r'|NaN in the logits|\bnan\b[^\n]{0,40}\bdetected\b|\bdetected\b[^\n]{0,40}\bnan\b'
                       r'|(?:Error|Exception)\b[^\n]*\b(?:contains?|produced|got|found)\b[^\n]{0,20}\b(?:NaN|nan|inf)s?\b')),
    ('hang', re.compile(r'watchdog timeout', re.I)),
    ('crashed', re.compile(r'Scheduler hit an exception|\b\w+Manager hit an exception|\b\w+ hit an exception'
                           r'|Received sigquit from a child process|SIGQUIT received'
                           r'|Initialization failed\. warmup error|Rank \d+ scheduler is dead'
                           r'|Child process unexpectedly failed')),
    ('unhealthy', re.compile(r'Health check failed')),
)
# When several markers are seen, the most specific wins.
REASON_PRIORITY = ('oom', 'nan', 'hang', 'crashed', 'unhealthy')

# Lines inside a traceback that say *why*, strongest first.  Each entry: (rank, regex).
TELLING_PATTERNS = (
    (0, re.compile(r'requires \d+(?:\.\w+)? arch|requires (?:an? )?(?:SM|sm)_?\d+|\bnot supported on\b'
                   r'|no kernel image is available|[Uu]nsupported (?:GPU |CUDA )?arch|unsupported (?:sm|SM)\d*'
                   r'|illegal memory access|CUDA error|CUBLAS_STATUS|cuDNN error|NCCL error'
                   r'|CUDA out of memory|OutOfMemoryError|probability tensor contains')),
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

    Returns a dict ``{kind, name, reason, detail}`` where ``kind`` is one of
    ``ready``, ``milestone``, ``fatal``, ``traceback``, ``exception``, ``other``.
    """
    reason = fatal_of(line, extra_fatal)
    if reason:
        return {'kind': 'fatal', 'name': None, 'reason': reason, 'detail': None}
    name, detail = milestone_of(line)
    if name == 'ready':
        return {'kind': 'ready', 'name': name, 'reason': None, 'detail': None}
    if name:
        return {'kind': 'milestone', 'name': name, 'reason': None, 'detail': detail}
    if TRACEBACK_START.search(line):
        return {'kind': 'traceback', 'name': None, 'reason': None, 'detail': None}
    if is_exception_line(line):
        return {'kind': 'exception', 'name': None, 'reason': None, 'detail': None}
    return {'kind': 'other', 'name': None, 'reason': None, 'detail': None}


class LogState(object):
    """Incremental classification of a log stream.

    Feed lines with :meth:`feed` (one line) or :meth:`feed_text` (raw output);
    read ``ready``, ``milestone``, ``reason`` (fatal reason or None),
    :meth:`evidence` and :meth:`tail`.
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
            self._fatal(c['reason'], line)
            if TRACEBACK_START.search(line):
                self.in_traceback = True
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
            self.fatal_line = line

    # -- reading ---------------------------------------------------------
    def telling_line(self):
        """The first strongest telling line, else the last exception line, else the fatal marker."""
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
        }


def classify_lines(lines, tail_size=40):
    """Classify a complete list of lines (pure helper): returns :meth:`LogState.to_dict` plus ``tail``."""
    st = LogState(tail_size=tail_size)
    st.feed_lines(lines)
    d = st.to_dict()
    d['tail'] = st.tail()
    return d


def compile_patterns(patterns, default_reason='crashed'):
    """Compile user patterns (strings, or dicts ``{regex, reason}``) into ``(reason, regex)`` pairs."""
    out = []
    for p in patterns or ():
        if isinstance(p, dict):
            out.append((p.get('reason') or default_reason, re.compile(p['regex'])))
        else:
            out.append((default_reason, re.compile(p)))
    return out
