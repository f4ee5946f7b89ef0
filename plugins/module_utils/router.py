# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router in front of the servers: the Shepherd Model Gateway (PyPI ``smg``), run by the ``router`` role.

Its members are kept by the collection in a file-discovery manifest (``--discovery-provider file``): the router
reads it again as soon as it changes, keeps the last good one when a new one is bad, and drains a worker whose entry
is removed. The inventory says which servers sit behind which router (``router_backends`` on the router, default
every host of ``sglang_servers``); a serving group is one worker, its rank 0 (the other ranks serve no API).
Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit
from ansible_collections.llmserve.sglang.plugins.module_utils.sglang_flags import EnvRef

MANIFEST_VERSION = 1   # smg 1.13.0 refuses version 2
KEYS_ENV = 'SMG_CONTROL_PLANE_KEYS'   # id:name:role:key, in the 0600 environment file
WORKER_KEY_ENV = 'SGLANG_API_KEY'     # the servers' key, which the router sends them


def _backend(host, facts):
    """One server's worker entry, or None for a serving group's rank >= 1."""
    group = str(facts.get('sglang_group') or '')
    if group and int(facts.get('sglang_node_rank') or 0) != 0:
        return None
    address = facts.get('sglang_address') or facts.get('ansible_host') or host
    if ':' in str(address) and not str(address).startswith('['):
        address = '[%s]' % address
    return {'id': host, 'url': 'http://%s:%s' % (address, int(facts.get('sglang_port') or 30000)),
            'model': str(facts.get('sglang_served_model_name') or facts.get('sglang_model_path') or '')}


def resolve(names, groups):
    """``router_backends`` (inventory hosts or group names, in order) -> hosts, each once; empty: every host of
    ``sglang_servers``."""
    if not names:
        return list(groups.get('sglang_servers') or [])
    out = []
    for name in names:
        for host in (groups[name] if name in groups else [name]):
            if host not in out:
                out.append(host)
    return out


def backends(router, names, facts_of, servers):
    """The workers of ``router``: ``names`` (``router_backends``: inventory hosts or groups, resolved by the caller
    to hosts) -> ({'workers': [...], 'errors': [...]}). ``facts_of(host)`` gives the host's variables (the contract's
    ``sglang_*`` and ``ansible_host``); ``servers`` are the hosts of ``sglang_servers``."""
    errors, workers, models = [], [], {}
    for host in names:
        if host not in servers:
            errors.append('router_backends of %s names %s, which is not in the group sglang_servers: name SGLang '
                          'servers only' % (router, host))
            continue
        worker = _backend(host, facts_of(host))
        if worker is None:
            continue
        workers.append(worker)
        models.setdefault(worker['model'], []).append(host)
    if len(models) > 1:
        errors.append('the servers behind %s serve different models (%s): a router sends any request to any of its '
                      'workers, so give each model its own router (router_backends)' % (
                          router, '; '.join('%s: %s' % (m or '(none)', ', '.join(h)) for m, h in sorted(models.items()))))
    if not workers and not errors:
        errors.append('router_backends of %s leaves no server to route to' % router)
    return {'workers': workers, 'errors': errors}


def manifest(workers, leave=()):
    """The discovery manifest (text): every worker but those of ``leave`` (hosts taken out, e.g. to drain them)."""
    entries = [{'id': w['id'], 'url': w['url']} for w in workers if w['id'] not in leave]
    return json.dumps({'version': MANIFEST_VERSION, 'workers': entries}, indent=2, sort_keys=True) + '\n'


def launch_argv(binary, params):
    """``smg launch`` argv for the unit. The control-plane key and the servers' key are substituted by systemd from
    the 0600 environment file (``${SMG_CONTROL_PLANE_KEYS}``, ``${SGLANG_API_KEY}``), never written in the unit."""
    argv = [binary, 'launch',
            '--host', str(params['host']), '--port', str(params['port']),
            '--policy', str(params['policy']),
            '--discovery-provider', 'file', '--discovery-file', str(params['manifest']),
            '--discovery-check-interval-secs', str(params['discovery_interval']),
            '--health-check-endpoint', '/health',
            '--health-check-interval-secs', str(params['health_interval']),
            '--health-check-timeout-secs', str(params['health_timeout']),
            '--health-failure-threshold', str(params['health_failures']),
            '--health-success-threshold', str(params['health_successes']),
            '--prometheus-host', str(params['prometheus_host']), '--prometheus-port', str(params['prometheus_port']),
            '--shutdown-grace-period-secs', str(params['shutdown_grace'])]
    if params.get('control_plane_key'):
        argv += ['--control-plane-api-keys', EnvRef(KEYS_ENV)]
    if params.get('worker_api_key'):
        argv += ['--api-key', EnvRef(WORKER_KEY_ENV)]
    return argv


def unit_text(binary, params):
    """The router's unit: restarted on failure, stopped with SIGTERM (smg's graceful shutdown) within its grace."""
    return systemd_unit.render_unit(
        launch_argv(binary, params), params['service_name'], params['env_file'],
        description='Shepherd Model Gateway (smg) in front of the SGLang servers', restart='on-failure',
        restart_sec=5, timeout_stop_sec=int(params['shutdown_grace']) + 10, module='router')


def env_text(params):
    """The 0600 environment file: the control-plane key (as ``id:name:role:key``) and the servers' key."""
    env = {}
    if params.get('worker_api_key'):
        env[WORKER_KEY_ENV] = params['worker_api_key']
    key = params.get('control_plane_key')
    return systemd_unit.render_env_file(env, api_key=('llmserve:llmserve:admin:%s' % key) if key else None,
                                        api_key_env=KEYS_ENV, module='router')


def file_sd(router, address, params):
    """The router's Prometheus ``file_sd`` target (text): smg's own metrics port, at ``address`` (the router host's
    address as Prometheus reaches it) unless smg listens on one address only."""
    host = str(params['prometheus_host'])
    if host not in ('0.0.0.0', '::', ''):
        address = host
    if ':' in str(address) and not str(address).startswith('['):
        address = '[%s]' % address
    groups = [{'targets': ['%s:%s' % (address, int(params['prometheus_port']))], 'labels': {'smg_router': router}}]
    return json.dumps(groups, indent=2, sort_keys=True) + '\n'


def out_of_service_within(params):
    """Seconds at most from a server's last good answer to the router's marking it unhealthy."""
    return int(params['health_interval']) * int(params['health_failures']) + int(params['health_timeout'])


def listing(body, members, allow_extra=False):
    """smg's ``GET /workers`` answer (``body``) against the router's ``members`` ({'id', 'url'}) -> {'missing': the
    ids of members not listed healthy, 'extra': the URLs listed that are no member (a removed member drains for
    ``drain_settle_secs`` before smg drops it), 'settled': nothing missing and, unless ``allow_extra`` (check mode,
    which writes no manifest), nothing extra}."""
    listed = (body.get('workers') or []) if isinstance(body, dict) else []
    healthy = set(w.get('url') for w in listed if w.get('is_healthy'))
    urls = set(m['url'] for m in members)
    missing = [m['id'] for m in members if m['url'] not in healthy]
    extra = [w.get('url') for w in listed if w.get('url') not in urls]
    return {'missing': missing, 'extra': extra, 'settled': not missing and (allow_extra or not extra)}
