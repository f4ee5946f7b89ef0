# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for a service's share of a host's GPUs (sglang_gpus); the logic lives in module_utils/gpu_subset.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_subset as subset_utils


def gpu_subset(gpus, selection, env=None, candidates=None, known_good=None):
    """The host's GPUs (gpu_info's ``gpus``) narrowed to ``selection`` (sglang_gpus), with the server's environment.

    The candidates' and the known-good configuration's own ``env`` (added to the server's) are checked too."""
    out = subset_utils.resolve(selection, gpus)
    if not out['errors']:
        out['errors'] = subset_utils.env_errors(env, out)
        for index, cand in enumerate(candidates or []):
            if isinstance(cand, dict):
                out['errors'].extend(subset_utils.env_errors(cand.get('env'), out, 'sglang_candidates[%d].env' % index))
        if isinstance(known_good, dict):
            out['errors'].extend(subset_utils.env_errors(known_good.get('env'), out, 'sglang_known_good.env'))
    out['env'] = subset_utils.server_env(env, out)
    return out


class FilterModule(object):
    def filters(self):
        return {'gpu_subset': gpu_subset}
