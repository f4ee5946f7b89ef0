#!/usr/bin/env python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real CUDA memory holder for tests/gpu/gpu_check.yml (needs PyTorch and an NVIDIA GPU).

Allocates ``--gib`` GiB on ``--device`` with ``torch.empty`` (a plain cudaMalloc through PyTorch's
caching allocator), writes ``--ready-file`` (JSON: pid, bytes, device, ignore_sigterm, t_ready) and
sleeps, at most ``--max-seconds`` so that it never outlives the check.

On SIGTERM it writes ``<ready-file>.term`` (the wall time it got the signal) and exits normally; with
``--ignore-sigterm`` it ignores SIGTERM (only SIGKILL ends it), like a server stuck in teardown.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import signal
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--gib', type=float, default=20.0)
    parser.add_argument('--device', default='cuda:0')
    parser.add_argument('--ready-file', required=True)
    parser.add_argument('--ignore-sigterm', action='store_true')
    parser.add_argument('--max-seconds', type=float, default=300.0)
    parser.add_argument('--backend', choices=['torch', 'fakegpu'], default='torch',
                        help='fakegpu: hold through the lab fake (tests/lab/fakes/fakegpu.py, FAKEGPU_ROOT) '
                             'to rehearse the playbook without a GPU')
    args = parser.parse_args(argv)

    term_file = args.ready_file + '.term'

    def on_term(signum, frame):
        with open(term_file, 'w') as handle:
            handle.write('%.6f\n' % time.time())
        sys.exit(0)

    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, on_term)

    nbytes = int(args.gib * (1 << 30))
    t0 = time.time()
    if args.backend == 'fakegpu':
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lab', 'fakes'))
        import fakegpu  # pylint: disable=import-error

        index = int(args.device.split(':')[-1])
        block = fakegpu.hold({index: nbytes >> 20}, name='python3')
        extra = {'torch': None, 'gpu': fakegpu.load_config()['name']}
    else:
        import torch  # pylint: disable=import-error

        block = torch.empty(nbytes, dtype=torch.uint8, device=args.device)
        block.fill_(1)  # touch it: the memory is really in use
        torch.cuda.synchronize(args.device)
        extra = {'torch': torch.__version__, 'gpu': torch.cuda.get_device_name(args.device)}
    info = {
        'pid': os.getpid(), 'bytes': nbytes, 'device': args.device, 'ignore_sigterm': args.ignore_sigterm,
        't_start': t0, 't_ready': time.time(), 'backend': args.backend,
    }
    info.update(extra)
    tmp = args.ready_file + '.tmp'
    with open(tmp, 'w') as handle:
        json.dump(info, handle)
    os.rename(tmp, args.ready_file)
    end = time.time() + args.max_seconds
    while time.time() < end:
        time.sleep(0.2)
    del block
    return 0


if __name__ == '__main__':
    sys.exit(main())
