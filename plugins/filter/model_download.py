# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for downloading a hub model before the trials; the logic lives in module_utils/model_download.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import model_download as download_utils


def model_download_errors(repo_id, revision, cache, env=None, python=None, hf_found=None):
    """The problems with the download's inputs, each naming the variable and the fix; empty when fine."""
    return download_utils.errors(repo_id, revision, cache, (env or {}).get('HF_ENDPOINT'), python, hf_found)


def model_download_dir(repo_id, cache):
    """The folder ``repo_id`` is downloaded into: ``cache/owner/name``."""
    return download_utils.local_dir(cache, repo_id)


class FilterModule(object):
    def filters(self):
        return {'model_download_errors': model_download_errors, 'model_download_dir': model_download_dir}
