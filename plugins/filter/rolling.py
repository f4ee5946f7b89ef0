# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for rolling changes behind the router (logic in module_utils/rolling.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import metrics, rolling, router

FACTS = ('sglang_group', 'sglang_node_rank', 'sglang_address', 'ansible_host', 'sglang_port',
         'sglang_served_model_name', 'sglang_model_path') + tuple(rolling.ROUTER_DEFAULTS)


def _facts_of(hostvars):
    def facts_of(host):
        facts = hostvars[host]
        return dict((k, facts.get(k)) for k in FACTS)
    return facts_of


def _states(hostvars, hosts):
    return dict((h, hostvars[h].get('sglang_service_final_state')) for h in hosts)


def _details(hostvars, hosts):
    return dict((h, hostvars[h].get('rolling_host') or {}) for h in hosts)


def rolling_plan(hostvars, hosts, groups, batch, drain_timeout, request_timeout):
    """The rollout of the play's ``hosts`` after preflight (each host's ``preflight_settings.metrics``)."""
    hosts = list(hosts or [])
    settings = {'batch': batch, 'drain_timeout': drain_timeout, 'request_timeout': request_timeout,
                'metrics': dict((h, bool((hostvars[h].get('preflight_settings') or {}).get('metrics', True)))
                                for h in hosts)}
    return rolling.plan(hosts, _facts_of(hostvars), groups, settings)


def rolling_routers(the_plan, batch, hostvars=None):
    """The routers of a ``batch`` (hosts): their manifests without the batch's servers (``without``) and with those
    that answer again (``back``: the final state says the server serves, or its previous unit was put back)."""
    out = rolling.batch_routers(the_plan, list(batch or []))
    if hostvars is not None:
        states = _states(hostvars, list(batch or []))
        staying_out = [h for h in batch if states.get(h) not in rolling.ANSWERS]
        for item in out:
            workers = the_plan['routers'][item['router']]['workers']
            item['back'] = router.manifest(workers, leave=staying_out)
            item['back_urls'] = [w['url'] for w in workers if w['id'] in batch and w['id'] not in staying_out]
    return out


def rolling_router_view(answer, urls):
    return rolling.router_view(answer, list(urls or []))


def rolling_stopped_by(the_plan, hostvars, host):
    hosts = [h for b in (the_plan or {}).get('batches') or [] for h in b]
    return rolling.stopped_by(the_plan, _states(hostvars, hosts), host, _details(hostvars, hosts))


def rolling_summary(the_plan, hostvars):
    """The rollout's summary for the report, or None outside a rolling change."""
    if not the_plan:
        return None
    hosts = [h for b in (the_plan or {}).get('batches') or [] for h in b]
    return rolling.summary(the_plan, _states(hostvars, hosts), _details(hostvars, hosts))


def rolling_batch_of(the_plan, host):
    return rolling.batch_of(the_plan, host)


def rolling_url(the_plan, host):
    return rolling.url_of(the_plan, host)


def rolling_back_in(waits, url):
    return rolling.back_in(list(waits or []), url)


def metrics_in_flight(text):
    return metrics.in_flight(text)


class FilterModule(object):
    def filters(self):
        return {'rolling_plan': rolling_plan, 'rolling_routers': rolling_routers,
                'rolling_router_view': rolling_router_view, 'rolling_stopped_by': rolling_stopped_by,
                'rolling_summary': rolling_summary, 'rolling_batch_of': rolling_batch_of, 'rolling_url': rolling_url,
                'rolling_back_in': rolling_back_in, 'metrics_in_flight': metrics_in_flight}
