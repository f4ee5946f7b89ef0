# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling changes of a fleet behind the router (``playbooks/rolling.yml``, role ``rolling``).

The deploy's per-host steps run batch by batch (``sglang_rolling_batch`` units, a count or a percentage; a serving
group is one unit). Per batch: its servers leave every router in front of them (the router's file-discovery manifest
is written without them, so that smg drains them), the collection waits until SGLang's own ``/metrics`` shows no
request running or queued (at most ``sglang_drain_timeout`` seconds), the deploy runs as ``deploy.yml`` runs it, the
servers that serve go back into the manifest, and the batch ends when the router reports them healthy and ready. A
batch in which a host does not end serving stops the rollout: the later batches' hosts are left as they are.

Pure functions, stdlib only: the plan (:func:`plan`), the manifests of a batch (:func:`batch_routers`), the router's
answers read (:func:`router_view`), and the rollout's summary for the report (:func:`summary`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import router

# The router role's defaults that the rollout reads from a router host's variables (a unit test checks that they
# agree with roles/router/defaults/main.yml).
ROUTER_DEFAULTS = {'router_backends': [], 'router_port': 30080, 'router_host': '0.0.0.0',
                   'router_config_dir': '/etc/llmserve/smg', 'router_discovery_interval': 5,
                   'router_health_interval': 5, 'router_health_timeout': 5, 'router_health_successes': 1}
# Final states after which the rollout goes on (check mode changes nothing and so stops nothing).
GOES_ON = ('serving', 'check_mode')
# Final states whose server answers again (the chosen configuration, or the previous unit restored): back in.
ANSWERS = ('serving', 'rolled_back', 'check_mode')
NOT_REACHED = 'not_reached'


def parse_batch(value, units):
    """``sglang_rolling_batch`` (a count, or a percentage such as ``25%``) of ``units`` -> (units per batch, error).
    A percentage rounds down, to at least one unit (as Ansible's ``serial`` does)."""
    text = str(value if value is not None else '').strip()
    fix = ('sglang_rolling_batch is %r: give how many hosts or serving groups change at once, a count of 1 or more '
           '(such as 1) or a percentage above 0%% and at most 100%% (such as 25%%)' % (value,))
    if text.endswith('%'):
        try:
            percent = float(text[:-1].strip())
        except ValueError:
            return None, fix
        if not 0 < percent <= 100:
            return None, fix
        return max(1, int(units * percent / 100.0)), None
    try:
        count = int(text)
    except ValueError:
        return None, fix
    if count < 1 or str(count) != text.lstrip('+'):
        return None, fix
    return max(1, min(count, units)), None


def units(hosts, facts_of):
    """The hosts as rollout units, in their order: one host, or a serving group's members (``sglang_group``) together,
    rank 0 first, at the place of the group's first member."""
    out, where = [], {}
    for host in hosts:
        group = str(facts_of(host).get('sglang_group') or '')
        if group and group in where:
            out[where[group]].append(host)
            continue
        if group:
            where[group] = len(out)
        out.append([host])
    return [sorted(unit, key=lambda h: int(facts_of(h).get('sglang_node_rank') or 0)) for unit in out]


def _setting(facts, name):
    value = facts.get(name)
    return ROUTER_DEFAULTS[name] if value is None or value == '' else value


def _router_info(name, facts, workers):
    host = str(_setting(facts, 'router_host'))
    return {'router': name,
            'address': '127.0.0.1' if host in ('0.0.0.0', '::', '') else host,
            'port': int(_setting(facts, 'router_port')),
            'manifest': '%s/workers.json' % str(_setting(facts, 'router_config_dir')).rstrip('/'),
            'leave_within': int(_setting(facts, 'router_discovery_interval')) + 15,
            'back_within': (int(_setting(facts, 'router_health_interval')) * (int(_setting(facts, 'router_health_successes')) + 2)
                            + int(_setting(facts, 'router_health_timeout')) + int(_setting(facts, 'router_discovery_interval')) + 30),
            'workers': workers}


def plan(hosts, facts_of, groups, settings):
    """The rollout of the play's ``hosts`` (in inventory order). ``facts_of(host)`` gives a host's variables (the
    servers' ``sglang_*`` and the routers' ``router_*``); ``groups`` the inventory's; ``settings``: ``batch``
    (``sglang_rolling_batch``), ``drain_timeout``, ``request_timeout`` (seconds), ``metrics`` ({host: bool}).

    -> {'errors', 'batch', 'batches' ([[host]]), 'sizes', 'order', 'pattern' (the hosts in batch order, for the
    play's ``hosts``), 'routers' ({router: address, port, manifest path, workers, how long to wait})}."""
    errors = []
    hosts = list(hosts or [])
    groups = dict((k, list(v)) for k, v in (groups or {}).items())
    all_units = units(hosts, facts_of)
    per_batch, error = parse_batch(settings.get('batch'), len(all_units) or 1)
    if error:
        errors.append(error)
        per_batch = 1
    drain, longest = settings.get('drain_timeout'), settings.get('request_timeout')
    try:
        drain, longest = float(drain), float(longest)
    except (TypeError, ValueError):
        errors.append('sglang_drain_timeout (%r) and sglang_request_timeout (%r) are seconds: give numbers' % (drain, longest))
        drain = longest = 0.0
    if drain < longest:
        errors.append('sglang_drain_timeout (%g s) is below sglang_request_timeout (%g s), the longest a request to '
                      'these servers may run: a drain that short would cut requests off; raise sglang_drain_timeout '
                      'to %g or more' % (drain, longest, longest))
    routers = {}
    servers = groups.get('sglang_servers') or []
    for name in groups.get('sglang_routers') or []:
        facts = facts_of(name)
        members = router.backends(name, router.resolve(list(_setting(facts, 'router_backends') or []), groups),
                                  facts_of, servers)
        in_play = [w for w in members['workers'] if w['id'] in hosts]
        if not in_play:
            continue
        errors.extend(members['errors'])
        routers[name] = _router_info(name, facts, members['workers'])
        for worker in in_play:
            if not (settings.get('metrics') or {}).get(worker['id'], True):
                errors.append('%s is behind the router %s and sglang_metrics is false on it: the drain reads the '
                              'requests running on the server from its /metrics; set sglang_metrics true' % (
                                  worker['id'], name))
    batches = []
    for start in range(0, len(all_units), per_batch):
        batches.append([h for unit in all_units[start:start + per_batch] for h in unit])
    order = [h for batch in batches for h in batch]
    return {'errors': errors, 'batch': per_batch, 'batches': batches, 'sizes': [len(b) for b in batches] or [1],
            'order': order, 'pattern': ','.join(order), 'routers': routers}


def batch_routers(the_plan, batch):
    """The routers with a server of ``batch`` (hosts): for each, its address, port and manifest path, the ``urls`` of
    the batch's workers, the manifest ``without`` them and the full one (``with``)."""
    out = []
    for name in sorted((the_plan or {}).get('routers') or {}):
        info = the_plan['routers'][name]
        leaving = [w for w in info['workers'] if w['id'] in batch]
        if not leaving:
            continue
        item = dict((k, info[k]) for k in ('router', 'address', 'port', 'manifest', 'leave_within', 'back_within'))
        item.update({'urls': [w['url'] for w in leaving], 'ids': [w['id'] for w in leaving],
                     'without': router.manifest(info['workers'], leave=[w['id'] for w in leaving]),
                     'with': router.manifest(info['workers'])})
        out.append(item)
    return out


def router_view(workers_answer, urls):
    """smg's ``GET /workers`` answer (its JSON) and the ``urls`` of interest -> {'ready': urls listed ready and
    healthy, 'listed': urls listed at all (ready or draining)}."""
    listed, ready = [], []
    for worker in (workers_answer or {}).get('workers') or []:
        url = worker.get('url')
        if url not in urls:
            continue
        listed.append(url)
        if worker.get('is_healthy') and str(worker.get('status') or 'ready') == 'ready':
            ready.append(url)
    return {'ready': sorted(ready), 'listed': sorted(listed)}


def batch_of(the_plan, host):
    """The 1-based number of ``host``'s batch (0 when it is in none)."""
    for number, batch in enumerate((the_plan or {}).get('batches') or [], 1):
        if host in batch:
            return number
    return 0


def _went_on(state, detail):
    return state in GOES_ON and (detail or {}).get('back_in_router', True) is not False


def url_of(the_plan, host):
    """``host``'s worker URL behind its routers (the first router's entry), or '' when no router has it."""
    for name in sorted((the_plan or {}).get('routers') or {}):
        for worker in the_plan['routers'][name]['workers']:
            if worker['id'] == host:
                return worker['url']
    return ''


def back_in(waits, url):
    """Whether ``url`` is back, healthy and ready, in every router that waited for it: ``waits`` are the results of
    the wait on each router (``item.back_urls`` and the ``json`` answer); False when no router took it back."""
    seen = False
    for result in waits or []:
        item = result.get('item') or {}
        if url not in (item.get('back_urls') or []):
            continue
        seen = True
        if url not in router_view(result.get('json') or {}, [url])['ready']:
            return False
    return seen


def stopped_by(the_plan, states, host, details=None):
    """The first earlier batch (its number) in which a host did not end serving or did not get back into its router,
    or 0: ``states`` are the final states ({host: state}; a host of an earlier batch without one did not get through
    its batch), ``details`` ({host: {...}}) what the rollout noted (``back_in_router``)."""
    details = details or {}
    mine = batch_of(the_plan, host)
    for number, batch in enumerate((the_plan or {}).get('batches') or [], 1):
        if number >= mine:
            break
        if not all(_went_on(states.get(h), details.get(h)) for h in batch):
            return number
    return 0


def summary(the_plan, states, details=None):
    """The rollout for the report: per batch its hosts, each host's final state (``not_reached`` for a host the
    rollout did not get to) and what ``details`` ({host: {...}}, the drain and the return) say; the batch's outcome
    (``served``, ``stopped``: a host did not end serving, ``not_reached``); ``stopped_at``: the first stopped batch."""
    details = details or {}
    out, stopped_at = [], 0
    for number, batch in enumerate((the_plan or {}).get('batches') or [], 1):
        hosts = []
        for host in batch:
            entry = {'host': host, 'final_state': states.get(host) or NOT_REACHED}
            entry.update(details.get(host) or {})
            hosts.append(entry)
        reached = [h for h in hosts if h['final_state'] != NOT_REACHED]
        if not reached:
            outcome = NOT_REACHED
        elif all(_went_on(h['final_state'], h) for h in hosts):
            outcome = 'served'
        else:
            outcome = 'stopped'
            stopped_at = stopped_at or number
        out.append({'batch': number, 'hosts': hosts, 'outcome': outcome})
    left = [h['host'] for b in out for h in b['hosts'] if h['final_state'] == NOT_REACHED]
    return {'batches': out, 'stopped_at': stopped_at, 'batch_size': (the_plan or {}).get('batch'),
            'left_as_they_were': left, 'routers': sorted((the_plan or {}).get('routers') or {})}
