# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of a readiness wait: call await_server_ready until it decides, print progress meanwhile.

Used by the ``await_server_ready`` action plugin. The module does the watching on the host and returns
``loading`` after at most ``step`` seconds; this loop calls it again with the returned cursor. A thread prints a
progress line (the last milestone and the time since the server started) every ``every`` seconds, so a module
call can be longer than the progress interval: a single server is called once a ``SINGLE_STEP`` seconds.

The members of a serving group wait together: each posts its latest result on a :class:`GroupBoard` (files in the
controller's temporary directory of this run) and a member that is still loading stops as soon as another rank
has failed, as the role decides the group's verdict from all of them afterwards.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import threading
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import _files
from ansible_collections.llmserve.sglang.plugins.module_utils import serving_group

# A single server's module call returns 'loading' after this many seconds at most (a group's every ``every``).
SINGLE_STEP = 60.0


def progress_line(label, result, since):
    """'LABEL: MILESTONE, ELAPSED s' from the last module result, ``since`` seconds after it came back."""
    elapsed = float(result.get('elapsed') or 0) + max(0.0, since)
    return '%s: %s, %.1f s' % (label, result.get('milestone') or 'starting', elapsed)


class GroupBoard(object):
    """The latest await result of each member of a serving group, shared between the controller's workers."""

    def __init__(self, root, group, host, key=''):
        ident = json.dumps([group.get('name'), group.get('head'),
                            sorted(m.get('host') for m in group.get('members') or []), key], sort_keys=True)
        self.dir = os.path.join(root, 'llmserve-await', hashlib.sha1(ident.encode('utf-8')).hexdigest()[:16])
        self.group = group
        self.host = host

    def post(self, result):
        if not os.path.isdir(self.dir):
            try:
                os.makedirs(self.dir, 0o700)
            except OSError:
                if not os.path.isdir(self.dir):
                    raise
        data = json.dumps({'status': result.get('status'), 'reason': result.get('reason'),
                           'evidence': result.get('evidence'), 'milestone': result.get('milestone'),
                           'elapsed': result.get('elapsed'), 'log_tail': result.get('log_tail')})
        _files.atomic_write(os.path.join(self.dir, '%s.json' % self.host), data, 0o600)

    def results(self):
        out = {}
        for member in self.group.get('members') or []:
            try:
                with open(os.path.join(self.dir, '%s.json' % member['host'])) as handle:
                    out[member['host']] = json.load(handle)
            except (IOError, OSError, ValueError):
                out[member['host']] = {}
        return out

    def group_failed(self):
        """True when the group's verdict from the posted results is a failure (another rank failed)."""
        verdict = serving_group.combine_await(self.group, self.results())
        return verdict.get('status') not in ('ready', 'loading')

    def group_waiting(self):
        """True while the group as posted is neither ready nor failed."""
        return serving_group.combine_await(self.group, self.results()).get('status') == 'loading'


class AwaitLoop(object):
    """Call ``call(step, cursor) -> module result`` until it decides; ``say(line)`` prints a progress line."""

    def __init__(self, call, every, say, label, shared=None, first_cursor=None, limit=1800.0, call_step=0,
                 clock=time.time):
        self.call = call
        self.call_step = float(call_step or 0)
        self.limit = float(limit)
        self.every = float(every)
        self.say = say
        self.label = label
        self.shared = shared
        self.cursor = first_cursor
        self.clock = clock
        self.last = {'status': 'loading'}
        self.last_at = clock()
        self.stop = threading.Event()

    def step(self):
        """How long one module call may wait: a group's members look at each other every ``every`` seconds."""
        if self.shared is not None:
            return self.every
        return self.call_step or max(self.every, SINGLE_STEP)

    def _printer(self):
        while not self.stop.wait(self.every):
            self.say(progress_line(self.label, self.last, self.clock() - self.last_at))

    def _done(self, result):
        if result.get('failed') or result.get('status') != 'loading':
            if self.shared is None or result.get('failed') or result.get('status') != 'ready':
                return True
            # a member that is ready goes on being watched while the rest of its group loads (bounded by the
            # wait's own timeout, for a group whose other members' workers do not run at the same time)
            return float(result.get('elapsed') or 0) >= self.limit or not self.shared.group_waiting()
        return self.shared is not None and self.shared.group_failed()

    def run(self):
        thread = threading.Thread(target=self._printer, name='await-progress')
        thread.daemon = True
        thread.start()
        try:
            while True:
                result = self.call(self.step(), self.cursor)
                self.last, self.last_at = result, self.clock()
                self.cursor = result.get('cursor') or self.cursor
                if self.shared is not None and not result.get('failed'):
                    self.shared.post(result)
                if self._done(result):
                    return result
                if result.get('status') == 'ready':
                    self.stop.wait(self.every)  # a ready member answers at once: look again after a while
        finally:
            self.stop.set()
