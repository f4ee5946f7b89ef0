#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: trial_run
short_description: Try a single host's planned SGLang candidates in one task
version_added: 0.3.0
description:
  - Tries each of O(planned) in turn on a host that serves alone, as the P(llmserve.sglang.backend_trial#role) role
    does, and returns the candidates' report entries and the one selected. For each candidate that is still wanted
    (nothing ready yet, or the C(selection) of O(settings) V(fastest)) - the screen when it is wanted (M(llmserve.sglang.sglang_launch)
    with dummy weights and a truncated model, then one M(llmserve.sglang.await_server_ready) call with a short request);
    unless the screen failed, the full trial (M(llmserve.sglang.sglang_launch), the readiness wait with a progress line
    every O(step) seconds, M(llmserve.sglang.smoke_generate) once ready, and a post-mortem
    M(llmserve.sglang.await_server_ready) call when the smoke test may have lost the server). The GPUs of the server
    started before are freed by the launch (O(free_gpus)).
  - A module that fails records the stage's launch error, and the next candidate is tried.
  - This is an action that runs those modules on the host from one controller task; the role uses it on a plain GPU
    host that is no member of a serving group, and its task files (one task a step) elsewhere. Not for check mode.
  - The role passes its facts; the options follow them (see the role's C(tasks/main.yml)).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.action
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
attributes:
  check_mode:
    support: none
  diff_mode:
    support: full
    details: Returns the diffs of the unit and env files that the launches wrote.
  platform:
    platforms: posix
options:
  planned:
    description: The candidates to try, in order (the plan's entries with outcome V(planned)).
    type: list
    elements: dict
    required: true
  by_name:
    description: The report entries by candidate name, as C(trial_init) makes them.
    type: dict
    required: true
  settings:
    description: The deploy's settings as preflight resolved them (C(preflight_settings)).
    type: dict
    required: true
  launch_defaults:
    description: The arguments every launch shares (C(preflight_launch_defaults)).
    type: dict
    required: true
  free_gpus:
    description: The clean-up settings that a launch uses to free the GPUs of the server started before it.
    type: dict
  record:
    description: The host's record, whose configurations that served need no screen.
    type: raw
  fingerprint:
    description: The host's GPU and model fingerprint, read against O(record).
    type: str
  sglang_version:
    description: The installed SGLang version, read against O(record).
    type: str
  context:
    description: What a diagnosis needs - C(extra_signatures), C(arch), C(flags), C(layers).
    type: dict
    default: {}
  smoke_timeout:
    description: Seconds the smoke test (and the screen's request) may take.
    type: int
    default: 120
  step:
    description: Seconds between progress lines while a model loads.
    type: int
    default: 10
  selected:
    description: A candidate already selected before these.
    type: str
  last_started:
    description: The candidate whose server was started last, before these.
    type: str
'''

EXAMPLES = r'''
- name: Try the planned candidates
  llmserve.sglang.trial_run:
    planned: "{{ preflight_plan | selectattr('outcome', 'equalto', 'planned') | list }}"
    by_name: "{{ preflight_plan | llmserve.sglang.trial_init }}"
    settings: "{{ preflight_settings }}"
    launch_defaults: "{{ preflight_launch_defaults }}"
    free_gpus: "{{ gpu_cleanup_free_gpus }}"
  register: trials
'''

RETURN = r'''
by_name:
  description: The report entries by candidate name, each with its screen and trial recorded.
  returned: success
  type: dict
selected:
  description: The last candidate that served correct text (the role chooses among them by its selection); null when none.
  returned: success
  type: str
last_started:
  description: The candidate whose server was started last.
  returned: success
  type: str
await_own:
  description: The last full trial's readiness result (its C(unit) holds the unit's C(InvocationID)).
  returned: success
  type: dict
runs:
  description:
    - Each module run in order, where the time went - C(module), C(candidate), C(stage) (V(screen) or V(trial)),
      C(seconds) (the run's wall time, a readiness wait's calls together), C(module_seconds) (the module's own),
      and a few fields of its result (a launch's C(changed), C(actions), C(unit_stop); a wait's C(status),
      C(reason), C(milestone), C(elapsed); a smoke test's C(ok), C(reason)); C(failed) and C(msg) for a failed run.
  returned: success
  type: list
  elements: dict
  sample: [{module: sglang_launch, candidate: known-good, stage: trial, seconds: 0.41, changed: true,
            actions: [daemon-reload, restart]}]
'''
