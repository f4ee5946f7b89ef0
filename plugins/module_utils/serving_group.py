# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serving groups: one SGLang server spread over several hosts (multi-node tensor parallel).

A single host is a group of one, so the roles treat every host the same way. Members of a multi-node
group share ``sglang_group`` and differ in ``sglang_node_rank``; rank 0 (the head) serves HTTP, the others
join it at ``--dist-init-addr``. Pure logic, no Ansible imports:

- :func:`check_group` validates a group from what preflight read on each member, and returns the launch
  options of one member (``--nnodes``, ``--node-rank``, ``--dist-init-addr``, the total ``--tp-size``);
- :func:`combine_await` turns the members' ``await_server_ready`` results into the group's one verdict,
  naming the rank that failed first (its peers die of the lost connection, which is not the cause);
- :func:`parse_addr`, :func:`probe`, :func:`is_local_address` check the dist-init address;
- :func:`stop_order` says when a host's unit is stopped in a clean-up: a group's rank 0 first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import re
import socket

DEFAULT_DIST_PORT = 20000

# Settings every member must share (public variable -> key in the member summary).
SHARED_SETTINGS = (
    ('sglang_model_path', 'model_path'),
    ('sglang_served_model_name', 'served_model_name'),
    ('sglang_quantization', 'quantization'),
    ('sglang_candidates', 'candidates'),
    ('sglang_known_good', 'known_good'),
    ('sglang_extra_args', 'extra_args'),
    ('sglang_env', 'env'),
    ('sglang_service_name', 'service_name'),
    ('sglang_port', 'port'),
    ('sglang_tp_size', 'tp_size_in'),
    ('sglang_selection', 'selection'),
    ('sglang_dist_init_addr', 'dist_init_addr'),
    ('sglang_tool_call_parser', 'tool_call_parser'),
    ('sglang_reasoning_parser', 'reasoning_parser'),
    ('sglang_disable_custom_all_reduce', 'disable_custom_all_reduce'),
)

# A rank that dies because a peer went away says so; that is a consequence, not the cause. SGLang 0.5.23 on a peer
# lost in its load: "other ranks that didn't finish loading" (model_runner_components/load_model_utils.py:393,
# after gloo's "failed to pass monitoredBarrier").
PEER_LOSS = re.compile(r'remote process exited|ncclRemoteError|Connection closed by peer|Connection reset by peer'
                       r'|waiting for clients|client socket has timed out'
                       r"|other ranks that didn't finish loading|failed to pass monitoredBarrier", re.I)


def parse_addr(addr):
    """'HOST:PORT' or '[IPV6]:PORT' -> (host, port). Raises ValueError with a message naming the fix."""
    text = str(addr or '').strip()
    if not text:
        raise ValueError('is empty; use HOST:PORT, e.g. 10.0.0.1:%d' % DEFAULT_DIST_PORT)
    if text.startswith('['):
        end = text.find(']')
        if end < 0 or text[end + 1:end + 2] != ':':
            raise ValueError('%r: an IPv6 address needs the form [ADDR]:PORT' % text)
        host, port = text[1:end], text[end + 2:]
    else:
        host, sep, port = text.rpartition(':')
        if not sep or not host:
            raise ValueError('%r has no port; use HOST:PORT, e.g. %s:%d' % (text, text, DEFAULT_DIST_PORT))
        if ':' in host:
            raise ValueError('%r: write an IPv6 address as [ADDR]:PORT' % text)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError('%r: the port must be a number 1-65535' % text)
    if any(c.isspace() for c in host):
        raise ValueError('%r: the host may not contain spaces' % text)
    return host, int(port)


def format_addr(host, port):
    return '[%s]:%d' % (host, port) if ':' in host else '%s:%d' % (host, port)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def stop_order(group, node_rank):
    """When this host's unit is stopped in a clean-up: ``head`` (rank 0 of a serving group: first), ``member`` (a rank
    >= 1: after the head) or ``single`` (no group).

    SGLang 0.5.23's rank >= 1 does not exit on SIGTERM: it logs ``SIGTERM received on node_rank N; waiting for the
    rank-0 ShutdownReq broadcast...`` and waits; rank 0's stop broadcasts the shutdown, and every node exits 0. A rank
    >= 1 stopped before rank 0 would wait out the stop timeout and be killed. Raises ValueError on a bad rank.
    """
    if not str(group or '').strip():
        return 'single'
    rank = _int(node_rank)
    if rank is None or rank < 0:
        raise ValueError('sglang_node_rank must be an integer >= 0, not %r' % (node_rank,))
    return 'head' if rank == 0 else 'member'


def single(member):
    """The group of one host: no multi-node flags."""
    count = _int((member.get('gpu') or {}).get('count')) or 0
    tp_in = _int(member.get('tp_size_in')) or 0
    return {'name': '', 'nnodes': 1, 'rank': 0, 'head': member['host'], 'is_head': True,
            'members': [{'host': member['host'], 'rank': 0, 'address': member.get('address')}],
            'dist_init_addr': None, 'tp_size': tp_in if tp_in > 0 else count, 'gpus_per_node': count}


def check_group(me, summaries, inventory_groups, play_hosts):
    """Validate the serving group of host ``me``.

    summaries: {host: member summary} for the hosts of this play that have one (preflight's
      ``preflight_member``: host, group, rank, address, gpu {arch, count, name}, sglang_version, tp_size_in,
      dist_init_addr, dist_init_port and the SHARED_SETTINGS keys).
    inventory_groups: {host: group name} of every inventory host that sets ``sglang_group``
      (members outside this play are found this way).
    play_hosts: the hosts of this play.
    -> (errors, group). Every error names the variable and the fix.
    """
    mine = summaries[me]
    name = str(mine.get('group') or '')
    if not name:
        return [], single(mine)
    errors = []
    members = sorted(h for h, g in inventory_groups.items() if str(g or '') == name)
    missing = [h for h in members if h not in play_hosts or h not in summaries]
    if missing:
        errors.append('sglang_group %r: member(s) %s are not in this run; a serving group deploys as one, so run it '
                      'for every member (check --limit and the sglang_servers group)' % (name, ', '.join(missing)))
        return errors, None
    if len(members) < 2:
        errors.append('sglang_group %r has only %s; a serving group needs two or more hosts: add the other members '
                      'or remove sglang_group' % (name, me))
        return errors, None
    ranks = {}
    for host in members:
        rank = _int(summaries[host].get('rank'))
        if rank is None or rank < 0:
            errors.append('sglang_node_rank of %s (group %r) is %r: give each member a rank 0..%d (0 serves HTTP)'
                          % (host, name, summaries[host].get('rank'), len(members) - 1))
            continue
        ranks.setdefault(rank, []).append(host)
    for rank, hosts in sorted(ranks.items()):
        if len(hosts) > 1:
            errors.append('sglang_node_rank %d is given to %s in group %r: each member needs its own rank'
                          % (rank, ' and '.join(hosts), name))
    if not errors and sorted(ranks) != list(range(len(members))):
        errors.append('sglang_node_rank in group %r are %s: use 0..%d, one per member (0 serves HTTP)'
                      % (name, sorted(ranks), len(members) - 1))
    if errors:
        return errors, None
    ordered = [ranks[r][0] for r in range(len(members))]
    head = ordered[0]

    def differs(key, label, fix):
        values = [(h, summaries[h].get(key)) for h in ordered]
        first = values[0][1]
        for host, value in values[1:]:
            if value != first:
                errors.append('group %r: %s differs: %s has %s, %s has %s; %s'
                              % (name, label, head, _short(first), host, _short(value), fix))
                return

    differs('sglang_version', 'the installed SGLang version', 'install the same version on every member')
    for host in ordered[1:]:
        a, b = summaries[head].get('gpu') or {}, summaries[host].get('gpu') or {}
        if a.get('arch') != b.get('arch'):
            errors.append('group %r: GPU arch differs: %s has %s (%s), %s has %s (%s); a group needs the same GPUs '
                          'on every member' % (name, head, a.get('arch'), a.get('name'), host, b.get('arch'),
                                               b.get('name')))
            break
    for var, key in SHARED_SETTINGS:
        differs(key, var, 'set it once for the group (group_vars), the same on every member')
    if errors:
        return errors, None

    nnodes = len(ordered)
    counts = [_int((summaries[h].get('gpu') or {}).get('count')) or 0 for h in ordered]
    tp_in = _int(mine.get('tp_size_in')) or 0
    if tp_in > 0:
        if tp_in % nnodes:
            errors.append('sglang_tp_size=%d cannot be split over the %d nodes of group %r: use a multiple of %d '
                          '(GPUs per node x nodes, e.g. %d), or 0 for all GPUs' % (tp_in, nnodes, name, nnodes,
                                                                                   min(counts) * nnodes))
            return errors, None
        per_node = tp_in // nnodes
    else:
        per_node = min(counts)
    for host, count in zip(ordered, counts):
        if per_node > count:
            errors.append('sglang_tp_size=%d needs %d GPUs on each of the %d nodes of group %r but %s has %d: set '
                          'sglang_tp_size to at most %d' % (per_node * nnodes, per_node, nnodes, name, host, count,
                                                            min(counts) * nnodes))
    if per_node < 1:
        errors.append('group %r: a member has no GPU' % name)
    if errors:
        return errors, None

    explicit = str(mine.get('dist_init_addr') or '').strip()
    if explicit:
        try:
            host, port = parse_addr(explicit)
        except ValueError as exc:
            errors.append('sglang_dist_init_addr %s' % exc)
            return errors, None
    else:
        host = str(summaries[head].get('address') or head)
        port = _int(mine.get('dist_init_port'))
        if port is None or not 1 <= port <= 65535:
            errors.append('sglang_dist_init_port=%r: use a free port 1-65535 on %s (default %d)'
                          % (mine.get('dist_init_port'), head, DEFAULT_DIST_PORT))
            return errors, None
    if port == _int(summaries[head].get('port')):
        errors.append('the dist-init port %d is sglang_port too: choose another sglang_dist_init_port' % port)
        return errors, None
    rank = ordered.index(me)
    return [], {
        'name': name, 'nnodes': nnodes, 'rank': rank, 'head': head, 'is_head': rank == 0,
        'members': [{'host': h, 'rank': i, 'address': summaries[h].get('address')} for i, h in enumerate(ordered)],
        'dist_init_addr': format_addr(host, port), 'dist_host': host, 'dist_port': port,
        'tp_size': per_node * nnodes, 'gpus_per_node': per_node,
    }


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


# ----------------------------------------------------------------------------------------- readiness
def _first(value):
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    return value


def _text(result):
    evidence = result.get('evidence')
    if not isinstance(evidence, (list, tuple)):
        evidence = [evidence]
    return '\n'.join(str(e) for e in evidence if e)


def combine_await(group, results):
    """The group's verdict from each member's await_server_ready result.

    group: from :func:`check_group`. results: {host: await result}. The head must be ``ready`` and every
    other rank ``ready`` (its dummy health server answers) for the group to be ready; any failed rank fails
    the group at once. The cause is the first failed rank whose evidence is not a lost peer.
    -> a result shaped like await_server_ready's (status, reason, evidence, ...) plus ``rank``, ``host`` and
    ``ranks`` (one line per member).
    """
    members = group.get('members') or []
    head = group.get('head')
    rows = []
    for m in members:
        r = results.get(m['host']) or {}
        rows.append({'rank': m['rank'], 'host': m['host'], 'status': r.get('status') or 'loading',
                     'reason': r.get('reason'), 'evidence': _first(r.get('evidence')),
                     'milestone': r.get('milestone'), 'elapsed': r.get('elapsed'), 'result': r})
    failed = [row for row in rows if row['status'] not in ('ready', 'loading')]
    head_result = dict(results.get(head) or {})
    if failed:
        primary = [row for row in failed if not PEER_LOSS.search(_text(row['result']))]
        cause = (primary or failed)[0]
        combined = dict(cause['result'])
        combined['status'] = cause['status']
        combined['evidence'] = 'rank %d (%s): %s' % (cause['rank'], cause['host'], cause['evidence'] or cause['reason'])
        combined['rank'], combined['host'] = cause['rank'], cause['host']
    elif all(row['status'] == 'ready' for row in rows):
        combined = head_result
        combined['status'] = 'ready'
        combined['rank'], combined['host'] = 0, head
    else:
        combined = head_result
        combined['status'] = 'loading'
        waiting = [row for row in rows if row['status'] != 'ready']
        combined['milestone'] = ', '.join('rank %d %s' % (row['rank'], row['milestone'] or 'starting')
                                          for row in waiting)
        combined['rank'], combined['host'] = None, None
    combined['ranks'] = [dict((k, v) for k, v in row.items() if k != 'result') for row in rows]
    return combined


# One fact per member -> the members for which it says "not good", by check:
#   failed       a registered result that failed (a missing one is not a failure: the task did not run there)
#   not_ready    an await_server_ready result whose status is not ready (missing: not ready)
#   not_serving  a value other than 'serving' (sglang_service_final_state; missing: not serving)
CHECKS = {
    'failed': lambda v: isinstance(v, dict) and bool(v.get('failed')),
    'not_ready': lambda v: not isinstance(v, dict) or v.get('status') != 'ready',
    'not_serving': lambda v: v != 'serving',
}


def members_failing(group, values, check):
    """[{'host', 'rank'}] of the group's members whose value (values: {host: value}) fails ``check``."""
    if check not in CHECKS:
        raise ValueError('check must be one of %s, got %r' % (', '.join(sorted(CHECKS)), check))
    test = CHECKS[check]
    return [{'host': m['host'], 'rank': m['rank']} for m in group.get('members') or [] if test(values.get(m['host']))]


def reuse_of(recorded, check):
    """The configuration a host reuses: ``recorded`` (the name of the configuration its record says serves) when the
    check-mode launch of it (``check``, a registered sglang_launch result) ran and found nothing to do but a
    daemon-reload (a change of the restart policy alone); '' otherwise (no record, a check that was skipped or is
    missing, or any other action)."""
    if not recorded or not isinstance(check, dict) or check.get('skipped') or 'actions' not in check:
        return ''
    return recorded if set(check.get('actions') or []) <= set(['daemon-reload']) else ''


def agreed_reuse(group, choices):
    """What the whole group reuses (choices: {host: name or ''}): the one name every member chose, '' when the members
    differ; a host alone reuses its own choice."""
    names = set(choices.get(m['host']) or '' for m in group.get('members') or [])
    return names.pop() if len(names) == 1 else ''


# ----------------------------------------------------------------------------------------- address checks
def resolve(host):
    """-> list of IP strings, or raises ValueError naming the host."""
    try:
        infos = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValueError('%s does not resolve (%s)' % (host, exc))
    seen = []
    for info in infos:
        ip = info[4][0]
        if ip not in seen:
            seen.append(ip)
    return seen


def is_local_address(ip):
    """True when this host owns ``ip`` (a socket can be bound to it)."""
    family = socket.AF_INET6 if ':' in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((ip, 0))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def probe(ip, port, timeout=3.0):
    """TCP connect to (ip, port) -> 'listening' | 'refused' (the host answered: reachable, nothing listens yet)
    | 'unreachable' (no answer in time, no route, network down)."""
    family = socket.AF_INET6 if ':' in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect((ip, port))
        return 'listening'
    except socket.timeout:
        return 'unreachable'
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return 'refused'
        return 'unreachable'
    finally:
        sock.close()
