# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for how a host is reached; the logic lives in module_utils/connection.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import connection as conn


def connection_errors(connection, connection_vmid, proxmox_node, proxmox_vmid):
    """Problems with how the host is reached: [message]."""
    return conn.errors(connection, connection_vmid, proxmox_node, proxmox_vmid)


def host_address(explicit, connection, ansible_host, inventory_hostname, ip_addr_output=''):
    """{address, source, error}: where the host's server is reached."""
    return conn.address(explicit, connection, ansible_host, inventory_hostname, ip_addr_output)


def pct_connection(connection):
    """True when the host is a container reached through its Proxmox node (pct exec)."""
    return conn.is_pct(connection)


class FilterModule(object):
    def filters(self):
        return {'connection_errors': connection_errors, 'host_address': host_address, 'pct_connection': pct_connection}
