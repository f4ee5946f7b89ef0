# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for a service's share of a host's GPUs (sglang_gpus); the logic lives in module_utils/gpu_subset.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_subset as subset_utils


def gpu_subset(gpus, selection, env=None):
    """The host's GPUs (gpu_info's ``gpus``) narrowed to ``selection`` (sglang_gpus), with the server's environment."""
    out = subset_utils.resolve(selection, gpus)
    if not out['errors']:
        out['errors'] = subset_utils.env_errors(env, out)
    out['env'] = subset_utils.server_env(env, out)
    return out


class FilterModule(object):
    def filters(self):
        return {'gpu_subset': gpu_subset}
