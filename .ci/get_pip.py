"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads.

ansible-test --venv creates its virtual environments without pip and runs
~/.ansible/test/cache/get_pip_<version>.py, which it downloads from a host
outside the package registries. This file, copied there by `make setup`,
does the same job with what is at hand: ensurepip (from the standard library)
bootstraps pip, then pip installs the exact packages ansible-test asked for
(for example pip==24.2) from the package index.

Usage (as ansible-test calls it): python get_pip_24_2.py [pip install options] PACKAGE...
"""

import ensurepip
import os
import subprocess
import sys

# get-pip.py options that are not pip install options.
GET_PIP_ONLY_OPTIONS = ('--no-setuptools', '--no-wheel')


def main():
    """Bootstrap pip, then install the requested packages with it."""
    # ensurepip sets PIP_CONFIG_FILE=/dev/null in os.environ; the real install
    # must see the machine's pip configuration (index, certificates).
    env = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install'] + args, env=env))


if __name__ == '__main__':
    main()
