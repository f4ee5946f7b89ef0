# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a host is reached, and the address its server is reached at.

A container is reached either over its own sshd (``ansible_host`` is the container's address) or, when it runs no
sshd, through its Proxmox node with community.proxmox's ``proxmox_pct_remote`` connection (SSH to the node, then
``pct exec VMID``): then ``ansible_host`` is the node's address and the connection's ``proxmox_vmid`` names the
container. The clean-up reaches the container's GPU holders from the node either way, so it needs the node and the
vmid (``sglang_proxmox_node``, ``sglang_proxmox_vmid``); the report's endpoint and a serving group's members need the
container's own address.

Pure functions; the preflight role calls them through the filters in ``plugins/filter/connection.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# the connection plugins that run commands in a container through ``pct exec`` on its node
PCT_CONNECTIONS = ('proxmox_pct_remote', 'pct_remote')


def is_pct(connection):
    """True for a connection that reaches a container through its Proxmox node (any collection's name for it)."""
    return str(connection or '').rsplit('.', 1)[-1] in PCT_CONNECTIONS


def _vmid(value):
    text = str(value if value is not None else '').strip()
    return int(text) if re.match(r'^[0-9]+$', text) else None


def errors(connection, connection_vmid, proxmox_node, proxmox_vmid):
    """Problems with how a host is reached: [message]; empty when fine.

    ``connection``: ``ansible_connection``; ``connection_vmid``: the connection's ``proxmox_vmid`` (pct only);
    ``proxmox_node`` / ``proxmox_vmid``: ``sglang_proxmox_node`` / ``sglang_proxmox_vmid``.
    """
    if not is_pct(connection):
        return []
    out = []
    conn = _vmid(connection_vmid)
    ours = _vmid(proxmox_vmid)
    if conn is None or conn == 0:
        out.append('ansible_connection=%s needs proxmox_vmid, the container it runs commands in' % connection)
    if not str(proxmox_node or '').strip():
        out.append('ansible_connection=%s reaches the container through its Proxmox node: set sglang_proxmox_node '
                   'to the inventory name of that node (the clean-up ends GPU holders from there)' % connection)
    if not ours:
        out.append('ansible_connection=%s: set sglang_proxmox_vmid to the container\'s vmid (%s)'
                   % (connection, conn if conn else 'the proxmox_vmid of the connection'))
    elif conn and conn != ours:
        out.append('proxmox_vmid=%s (the connection runs commands in container %s) but sglang_proxmox_vmid=%s '
                   '(the clean-up would end GPU holders of container %s): make them the same'
                   % (conn, conn, ours, ours))
    return out


_IP_LINE = re.compile(r'^\d+:\s+(\S+)\s+inet6?\s+([0-9A-Fa-f:.]+)/\d+')


def parse_ip_addr(text):
    """The addresses of ``ip -o addr show scope global`` output, in order: [(interface, address)]."""
    out = []
    for line in (text or '').splitlines():
        m = _IP_LINE.match(line.strip())
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def address(explicit, connection, ansible_host, inventory_hostname, ip_addr_output=''):
    """-> {'address': str, 'source': str, 'error': str or None}: where this host's server is reached.

    ``explicit`` (``sglang_address``) wins; a container reached over pct has the node's ``ansible_host``, so its own
    first global address (from ``ip_addr_output``) is taken; otherwise ``ansible_host``, else the inventory name.
    """
    explicit = str(explicit or '').strip()
    if explicit:
        return {'address': explicit, 'source': 'sglang_address', 'error': None}
    if is_pct(connection):
        found = parse_ip_addr(ip_addr_output)
        if found:
            return {'address': found[0][1], 'source': 'container (%s)' % found[0][0], 'error': None}
        return {'address': '', 'source': '', 'error': (
            'ansible_connection=%s: %s is the node\'s address and the container has no global address to use: '
            'set sglang_address to the address clients reach the container at' % (connection, ansible_host))}
    host = str(ansible_host or '').strip() or str(inventory_hostname)
    return {'address': host, 'source': 'ansible_host', 'error': None}
