"""``python -m wasmsand._sandboxd``: the ``sandboxd`` server this package carries, run by the
RPC transport when no ``sandboxd`` binary is given."""

from __future__ import annotations

import sys

from ._native import sandboxd_main


def main() -> int:
    return sandboxd_main(["sandboxd", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
