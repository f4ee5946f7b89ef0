# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A service's share of a host's GPUs (``sglang_gpus``): parse, resolve, environment, clean-up decision.

``sglang_gpus`` is a list of GPU indices (``[0, 1]``), a list of GPU UUIDs (``['GPU-3f...']``) or one comma-separated
text of either (``'0,1'``); empty or unset means every GPU of the host. It is resolved against the GPUs that
``nvidia-smi`` lists (``index`` and ``uuid`` of each), so an index or UUID the host does not have is an error before
any change. The server then sees only its GPUs through ``CUDA_VISIBLE_DEVICES`` (the nvidia-smi indices, with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA numbers the GPUs the way nvidia-smi does).

Clean-up with a subset ends only a holder whose GPUs all lie inside the subset; a holder of GPUs of both sides is a
blocker (named, never signalled); a holder of other GPUs only is spared. Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

FIELD = 'sglang_gpus'
_DEVICE_RE = re.compile(r'^/dev/nvidia(\d+)$')
_INT_RE = re.compile(r'^\d+$')
_UUID_RE = re.compile(r'^(GPU|MIG)-[0-9A-Za-z-]+$')
_HINT = ('give GPU indices (for example [0, 1]) or GPU UUIDs (nvidia-smi -L), not both; '
         'leave it empty for all GPUs')


def _is_int(item):
    return isinstance(item, int) and not isinstance(item, bool)


def parse(value):
    """``sglang_gpus`` as given -> (items, kind, errors). kind: 'index', 'uuid' or None (empty: all GPUs)."""
    if value is None:
        return [], None, []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return [], None, []
        value = [part.strip() for part in text.split(',')]
    elif _is_int(value):
        value = [value]
    elif not isinstance(value, (list, tuple)):
        return [], None, ['%s: %r is neither a list nor a comma-separated text; %s' % (FIELD, value, _HINT)]
    if not value:
        return [], None, []
    items = []
    kinds = set()
    errors = []
    for item in value:
        if _is_int(item):
            if item < 0:
                errors.append('%s: %d is not a GPU index (0 or more); %s' % (FIELD, item, _HINT))
                continue
            items.append(item)
            kinds.add('index')
        elif isinstance(item, str) and _INT_RE.match(item.strip()):
            items.append(int(item.strip()))
            kinds.add('index')
        elif isinstance(item, str) and _UUID_RE.match(item.strip()):
            items.append(item.strip())
            kinds.add('uuid')
        else:
            errors.append('%s: %r is neither a GPU index nor a GPU UUID (GPU-...); %s' % (FIELD, item, _HINT))
    if len(kinds) > 1:
        errors.append('%s: mixes GPU indices and GPU UUIDs (%s); %s'
                      % (FIELD, ', '.join(str(x) for x in items), _HINT))
    seen = set()
    dups = []
    for item in items:
        key = item.lower() if isinstance(item, str) else item
        if key in seen and item not in dups:
            dups.append(item)
        seen.add(key)
    if dups:
        errors.append('%s: names %s more than once; list each GPU once'
                      % (FIELD, ', '.join(str(x) for x in dups)))
    if errors:
        return [], None, errors
    return items, kinds.pop() if kinds else None, []


def resolve(value, gpus):
    """``sglang_gpus`` against the host's GPUs ([{index, uuid, ...}] from gpu_info) -> dict.

    Keys: ``errors`` (list of messages, each naming sglang_gpus and the fix), ``all`` (no subset), ``indices`` and
    ``uuids`` (the selected GPUs, in the order given), ``count``, ``cuda_visible_devices`` (the value for the server's
    environment; empty without a subset).
    """
    host = sorted((g for g in gpus or [] if g.get('index') is not None), key=lambda g: g['index'])
    out = {'errors': [], 'all': True, 'indices': [g['index'] for g in host], 'uuids': [g.get('uuid') for g in host],
           'count': len(host), 'cuda_visible_devices': ''}
    items, kind, errors = parse(value)
    if errors:
        out['errors'] = errors
        return out
    if kind is None:
        return out
    have = ', '.join('%s (%s)' % (g['index'], g.get('uuid')) for g in host) or 'none'
    by_index = dict((g['index'], g) for g in host)
    by_uuid = dict(((g.get('uuid') or '').lower(), g) for g in host if g.get('uuid'))
    chosen = []
    unknown = []
    for item in items:
        gpu = by_index.get(item) if kind == 'index' else by_uuid.get(item.lower())
        if gpu is None:
            unknown.append(str(item))
        else:
            chosen.append(gpu)
    if unknown:
        out['errors'] = ['%s: this host has no GPU %s; its GPUs are %s: choose among them'
                         % (FIELD, ', '.join(unknown), have)]
        return out
    out.update(all=False, indices=[g['index'] for g in chosen], uuids=[g.get('uuid') for g in chosen],
               count=len(chosen), cuda_visible_devices=','.join(str(g['index']) for g in chosen))
    return out


def env_errors(env, subset, env_field='sglang_env'):
    """Errors when ``env`` (the server's environment as given) contradicts the subset. [] when it agrees or no subset.

    A CUDA_VISIBLE_DEVICES of the user's is accepted when it names the same GPUs (indices or UUIDs); a
    CUDA_DEVICE_ORDER other than PCI_BUS_ID would renumber the indices, so it is refused with a subset.
    """
    if not subset or subset.get('all'):
        return []
    env = env or {}
    errors = []
    given = env.get('CUDA_VISIBLE_DEVICES')
    if given is not None:
        items, kind, errs = parse(str(given))
        want = subset['indices'] if kind != 'uuid' else [(u or '').lower() for u in subset['uuids']]
        have = items if kind != 'uuid' else [x.lower() for x in items]
        if errs or have != want:
            errors.append('%s.CUDA_VISIBLE_DEVICES=%s disagrees with %s (GPUs %s): remove CUDA_VISIBLE_DEVICES from '
                          '%s (the deploy sets it from %s) or make them name the same GPUs'
                          % (env_field, given, FIELD, subset['cuda_visible_devices'], env_field, FIELD))
    order = env.get('CUDA_DEVICE_ORDER')
    if order is not None and str(order) != 'PCI_BUS_ID':
        errors.append('%s.CUDA_DEVICE_ORDER=%s: with %s it must be PCI_BUS_ID (nvidia-smi numbers the GPUs in bus '
                      'order); remove it or set it to PCI_BUS_ID' % (env_field, order, FIELD))
    return errors


def server_env(env, subset):
    """The server's environment with the subset's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (``env`` unchanged)."""
    out = dict(env or {})
    if subset and not subset.get('all'):
        out['CUDA_VISIBLE_DEVICES'] = subset['cuda_visible_devices']
        out['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'
    return out


def holder_gpus(rec):
    """The GPU indices a holder record holds: nvidia-smi's, plus ``/dev/nvidiaN`` nodes (N = index)."""
    found = set(rec.get('gpus') or [])
    for device in rec.get('devices') or []:
        match = _DEVICE_RE.match(device)
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


def split_holders(kill, gpus, own_unit=None):
    """The clean-up's kill list restricted to the GPUs ``gpus`` (indices) -> (kill, spared, blocked).

    ``gpus`` empty or None: everything stays in kill. A holder of subset GPUs only is ended; one of other GPUs only, or
    of no GPU in particular (only /dev/nvidiactl, /dev/nvidia-uvm...), is spared with ``why``; one that holds GPUs of
    both sides is blocked (never signalled: it belongs to another service too) and carries ``why`` naming them.
    A holder of subset GPUs that runs in another system service (its ``unit``, not ``own_unit``) is blocked too:
    another service on this service's GPUs is stopped by its owner, never ended here.
    """
    if not gpus:
        return list(kill), [], []
    if own_unit and not own_unit.endswith('.service'):
        own_unit += '.service'
    subset = set(gpus)
    keep, spared, blocked = [], [], []
    for rec in kill:
        held = holder_gpus(rec)
        inside = [g for g in held if g in subset]
        outside = [g for g in held if g not in subset]
        other_unit = rec.get('unit') and rec.get('unit') != own_unit
        if inside and not outside and not other_unit:
            keep.append(rec)
            continue
        item = dict(rec)
        if inside and other_unit:
            item['why'] = ('runs in %s, another service, and holds GPU(s) %s of this service: stop that service or '
                           'give this one other GPUs' % (rec['unit'], ', '.join(map(str, inside))))
            blocked.append(item)
        elif inside and outside:
            item['why'] = ('holds GPU(s) %s of this service and GPU(s) %s outside it'
                           % (', '.join(map(str, inside)), ', '.join(map(str, outside))))
            blocked.append(item)
        elif outside:
            item['why'] = 'holds only GPU(s) %s, outside this service\'s GPUs %s' % (
                ', '.join(map(str, outside)), ', '.join(map(str, sorted(subset))))
            spared.append(item)
        else:
            item['why'] = 'holds no GPU in particular (only %s)' % (', '.join(rec.get('devices') or []) or 'nothing')
            spared.append(item)
    return keep, spared, blocked


def blocked_message(blocked, gpus):
    """The failure message for the blocked holders (GPUs on both sides, or another service's)."""
    names = '; '.join('pid %s %s (%s)' % (b['pid'], b.get('name'), b['why']) for b in blocked)
    return ('GPU(s) %s cannot be freed without touching another service or other GPUs, nothing was signalled: %s; '
            'end them yourself or change the service\'s GPUs (sglang_gpus)' % (', '.join(map(str, sorted(gpus))), names))
