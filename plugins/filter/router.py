# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's files from the inventory (logic in module_utils/router.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import router

FACTS = ('sglang_group', 'sglang_node_rank', 'sglang_address', 'ansible_host', 'sglang_port',
         'sglang_served_model_name', 'sglang_model_path')


def router_files(hostvars, router_host, backends, groups, binary, params):
    """{'workers', 'errors', 'manifest', 'unit', 'env'} for ``router_host``: ``backends`` are router_backends (hosts
    or groups; empty: every host of sglang_servers), ``groups`` the inventory's, ``params`` the role's settings."""
    def facts_of(host):
        facts = hostvars[host]
        return dict((k, facts.get(k)) for k in FACTS)
    groups = dict((k, list(v)) for k, v in (groups or {}).items())
    out = router.backends(router_host, router.resolve(list(backends or []), groups), facts_of,
                          groups.get('sglang_servers') or [])
    params = dict(params or {})
    out['manifest'] = router.manifest(out['workers'])
    out['unit'] = router.unit_text(binary, params)
    out['env'] = router.env_text(params)
    out['out_of_service_within'] = router.out_of_service_within(params)
    out['targets'] = router.file_sd(router_host, hostvars[router_host].get('ansible_host') or router_host, params)
    return out


def router_listing(body, members, allow_extra=False):
    """smg's ``GET /workers`` answer against the members: {'missing', 'extra', 'settled'} (module_utils/router.py)."""
    return router.listing(body, list(members or []), bool(allow_extra))


class FilterModule(object):
    def filters(self):
        return {'router_files': router_files, 'router_listing': router_listing}
