# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's report: the one dict the report role writes as ``<host>.json`` and publishes for AWX.

``host_report(host, gpu, sglang_version, outcome, final_state, check_mode, group, head_address, port) -> dict``:
every key of the public report (docs/VARIABLES.md, "The report"), in one place. Stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import trial

# the keys of a host's report, in the order the JSON file lists them (sorted there); the group's when nnodes > 1
KEYS = ('host', 'gpu', 'sglang_version', 'candidates', 'selected', 'fallback_used', 'check_mode', 'final_state',
        'endpoint', 'group')
GROUP_KEYS = ('name', 'nnodes', 'rank', 'head', 'members', 'dist_init_addr', 'tp_size')


def selected_name(outcome, final_state, check_mode):
    """The configuration that serves: the chosen one when the host serves it; in check mode the one a run would
    serve; else None."""
    chosen = (outcome or {}).get('selected')
    if final_state == 'serving' or (check_mode and chosen not in (None, '')):
        return chosen
    return None


def host_report(host, gpu, sglang_version, outcome, final_state, check_mode, group, head_address, port):
    """The host's report.

    ``gpu``: preflight's GPU summary (name, compute_cap, count); ``outcome``: backend_trial's (results, selected);
    ``final_state``: sglang_service's; ``group``: the serving group (a group of one for a single host);
    ``head_address``: the address the group's head serves HTTP on; ``port``: the server's port.
    """
    outcome = outcome or {}
    group = group or {}
    results = outcome.get('results') or []
    chosen = outcome.get('selected')
    return {
        'host': host,
        'gpu': {'name': gpu.get('name'), 'compute_cap': gpu.get('compute_cap'), 'count': int(gpu.get('count') or 0)},
        'sglang_version': sglang_version,
        'candidates': results,
        'selected': selected_name(outcome, final_state, check_mode),
        'fallback_used': trial.fallback_used(results, chosen, final_state),
        'check_mode': bool(check_mode),
        'final_state': final_state,
        'endpoint': 'http://%s:%s' % (head_address, port),
        'group': dict((k, group.get(k)) for k in GROUP_KEYS) if int(group.get('nnodes') or 1) > 1 else None,
    }
