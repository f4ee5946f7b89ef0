# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A single host's trial of its planned candidates, in one task: the ``trial_run`` action's logic.

For a plain GPU host that serves alone (not a member of a serving group), the backend_trial role tries every
planned candidate in one ``llmserve.sglang.trial_run`` task instead of about fifteen tasks a candidate; the module
runs on the host are the same ones, in the same order, with the same arguments, as those of the role's task files
``screen.yml`` and ``trial.yml`` (which a serving group's members and a container still run):

- the screen (when wanted): ``sglang_launch`` with the screen's arguments (freeing the GPUs of the server started
  before it), then one ``await_server_ready`` call with its short request; recorded as the ``screen`` stage;
- the full trial (unless the screen failed): ``sglang_launch``, the readiness wait (``await_server_ready`` called
  until it decides, with progress lines), ``smoke_generate`` when ready, and a post-mortem ``await_server_ready``
  when the smoke test may have lost the server; recorded as the ``trial`` stage;
- a module that fails in either (the role's ``rescue``) records the stage's launch error.

The entries are written by :func:`module_utils.candidate.record`, as the role's ``candidate_entry`` filter writes
them. ``call(module, args)`` runs a module on the host, ``wait(args, label)`` runs a readiness wait with progress,
``say(line)`` prints a line on the controller, ``now()`` is the clock.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.llmserve.sglang.plugins.module_utils import candidate as entries
from ansible_collections.llmserve.sglang.plugins.module_utils import screen
from ansible_collections.llmserve.sglang.plugins.module_utils import trial

LAUNCH = 'llmserve.sglang.sglang_launch'
AWAIT = 'llmserve.sglang.await_server_ready'
SMOKE = 'llmserve.sglang.smoke_generate'
SCREEN_PROMPT = 'The capital city of France is'
BACKEND_KEYS = ('moe_runner_backend', 'fp4_gemm_backend', 'attention_backend')
# what the result's ``runs`` keeps of each module run's result (where the time went)
RUN_FIELDS = {
    LAUNCH: ('changed', 'actions', 'unit_stop'),
    AWAIT: ('status', 'reason', 'milestone', 'elapsed'),
    SMOKE: ('ok', 'reason'),
}


class TrialFailed(Exception):
    """A module of a stage failed: the role's rescue records the stage's launch error with this result."""

    def __init__(self, result):
        Exception.__init__(self, result.get('msg', 'unknown error'))
        self.result = result


class TrialRun(object):
    """The state of one host's trials: ``by_name`` (the report entries), ``selected``, ``last_started``, and
    ``await_own`` (the last full trial's readiness result)."""

    def __init__(self, params, call, wait, say, now=time.time):
        self.p = params
        self.call = call
        self.wait = wait
        self.say = say
        self.now = now
        self.by_name = dict(params.get('by_name') or {})
        self.selected = params.get('selected')
        self.last_started = params.get('last_started')
        self.await_own = None
        self.diffs = []
        self.changed = False
        self.runs = []
        self.stage = None
        self.candidate = None

    # ------------------------------------------------------------------ what the role's vars and conditions say
    @property
    def settings(self):
        return self.p.get('settings') or {}

    @property
    def defaults(self):
        return self.p.get('launch_defaults') or {}

    def wanted(self):
        """The trial's condition: nothing selected yet, or ``fastest`` (which tries every candidate)."""
        return self.selected in (None, '') or self.settings.get('selection') == 'fastest'

    def prev_failed(self):
        """The server started last has failed (its trial or its screen): the next clean-up kills it at once."""
        if self.last_started in (None, ''):
            return False
        entry = self.by_name.get(self.last_started) or {}
        return entry.get('outcome') == 'failed' or (entry.get('screen') or {}).get('outcome') == 'failed'

    def endpoint(self):
        out = {'host': self.settings.get('http_host'), 'port': self.defaults.get('port')}
        if self.defaults.get('api_key') is not None:
            out['api_key'] = self.defaults['api_key']
        return out

    # ------------------------------------------------------------------ module runs
    def timed(self, module, run):
        """``run()``'s result, noted in ``runs``: the module, the candidate and stage, the seconds it took here
        (``seconds``), the module's own ``seconds`` (``module_seconds``) and a few of its fields."""
        t0 = self.now()
        result = run()
        note = dict((k, result[k]) for k in RUN_FIELDS[module] if k in result)
        if 'seconds' in result:
            note['module_seconds'] = result['seconds']
        if result.get('failed'):
            note.update(failed=True, msg=result.get('msg'))
        note.update(module=module.split('.')[-1], candidate=self.candidate, stage=self.stage,
                    seconds=round(self.now() - t0, 3))
        self.runs.append(note)
        return result

    def run_module(self, module, args):
        result = self.timed(module, lambda: self.call(module, args))
        if result.get('failed'):
            raise TrialFailed(result)
        return result

    def free_gpus(self):
        """The launch's ``free_gpus``: the server started before is stopped (killed when it failed) and the GPUs
        are freed before the start; None before the first start."""
        free = self.p.get('free_gpus')
        if self.last_started in (None, '') or free is None:
            return None
        return dict(free, kill_unit=self.prev_failed())

    def launch(self, cand, extra_args, free_gpus):
        args = dict(self.defaults)
        args.update(state='restarted', enabled=False, extra_args=extra_args, force=cand.get('force', False),
                    restart='no', env=entries.combine(self.settings.get('env') or {}, cand.get('env') or {}, False))
        for key in BACKEND_KEYS:
            if cand.get(key):
                args[key] = cand[key]
        if free_gpus is not None:
            args['free_gpus'] = free_gpus
        result = self.run_module(LAUNCH, args)
        self.changed = self.changed or bool(result.get('changed'))
        if result.get('diff'):
            self.diffs.extend(result['diff'] if isinstance(result['diff'], list) else [result['diff']])
        return result

    def await_args(self, **more):
        args = dict(redact_values=self.p.get('redact_values') or [], service_name=self.defaults.get('service_name'))
        args.update(self.endpoint())
        args.update(more)
        return args

    # ------------------------------------------------------------------ the stages
    def record(self, cand, stage, results, seconds):
        self.by_name = entries.record(self.by_name, cand, stage, results, seconds, self.p.get('context'))

    def screen(self, cand):
        """screen.yml: a launch with dummy weights and a truncated model, one readiness call with a short request."""
        sc = self.settings.get('screen') or {}
        self.candidate, self.stage = cand['name'], 'screen'
        try:
            free_gpus = self.free_gpus()   # read before this candidate is noted as the one started last
            self.last_started = cand['name']
            t0 = self.now()
            extra = screen.screen_args(list(self.settings.get('extra_args') or []) + list(cand.get('extra_args') or []),
                                       sc.get('layers'))
            self.launch(cand, extra, free_gpus)
            ready = self.run_module(AWAIT, self.await_args(
                timeout=sc.get('timeout'), hang_timeout=min(int(self.settings.get('hang_timeout')), int(sc.get('timeout'))),
                probe={'endpoint': '/generate', 'prompt': SCREEN_PROMPT, 'max_tokens': 8,
                       'timeout': self.p.get('smoke_timeout')}))
        except TrialFailed as e:
            self.record(cand, 'screen_launch_error', {'failed': e.result}, None)
            return
        self.record(cand, 'screen', {'await': ready}, self.now() - t0)

    def full_trial(self, cand):
        """trial.yml: launch, await with progress, smoke test when ready, post-mortem when it may have lost the server."""
        self.candidate, self.stage = cand['name'], 'trial'
        try:
            self.launch(cand, list(self.settings.get('extra_args') or []) + list(cand.get('extra_args') or []),
                        self.free_gpus())
            self.last_started = cand['name']
            t0 = self.now()
            self.await_own = {'status': 'loading'}
            args = self.await_args(timeout=self.settings.get('ready_timeout'),
                                   hang_timeout=self.settings.get('hang_timeout'), progress=self.p.get('step'))
            self.await_own = ready = self.timed(AWAIT, lambda: self.wait(args, cand['name']))
            if ready.get('failed'):
                raise TrialFailed(ready)
            smoke = postmortem = None
            if ready.get('status') == 'ready':
                smoke = self.run_module(SMOKE, self.smoke_args(ready))
                if trial.lost_server(smoke):
                    args = self.await_args(timeout=30, hang_timeout=30, unhealthy_timeout=10, require_ready_line=False)
                    if ready.get('cursor'):
                        args['cursor'] = ready['cursor']
                    postmortem = self.run_module(AWAIT, args)
        except TrialFailed as e:
            self.record(cand, 'trial_launch_error', {'failed': e.result}, None)
            return
        self.record(cand, 'trial', {'await': ready, 'postmortem': postmortem, 'smoke': smoke}, self.now() - t0)
        if self.by_name[cand['name']].get('outcome') == 'ready':
            self.selected = cand['name']

    def smoke_args(self, ready):
        args = dict(self.endpoint(), served_model_name=self.settings.get('served_model_name'),
                    timeout=self.p.get('smoke_timeout'),
                    watch={'service_name': self.defaults.get('service_name'), 'cursor': ready.get('cursor')})
        if self.settings.get('smoke_prompts'):
            args['prompts'] = self.settings['smoke_prompts']
        if self.settings.get('benchmark_enabled'):
            args['benchmark'] = entries.combine({'model_path': self.defaults.get('model_path')},
                                                self.settings.get('benchmark') or {}, False)
        return args

    def run(self, planned):
        """Each planned candidate in turn, as the role's loop over positions does for one host."""
        for position, cand in enumerate(planned, 1):
            wanted = self.wanted()
            note = '' if wanted else ' (not needed: %s is ready)' % self.selected
            self.say('candidate %d: %s%s' % (position, cand['name'], note))
            if not wanted:
                continue
            if screen.wanted(cand, self.settings.get('screen'), self.p.get('record'), self.p.get('fingerprint'),
                             self.p.get('sglang_version')):
                self.screen(cand)
            if self.wanted() and ((self.by_name.get(cand['name']) or {}).get('screen') or {}).get('outcome') != 'failed':
                self.full_trial(cand)
        return {'by_name': self.by_name, 'selected': self.selected, 'last_started': self.last_started,
                'await_own': self.await_own, 'runs': self.runs}
