"""``python -m adapt <verb>``: adapt's command line from the Python package.

The verbs and flags are those of ``cargo xtask`` — ``gen``, ``inspect``,
``load``, ``pack`` (alias ``shard``) and ``tune`` (``--command`` included) —
run by the same Rust code, so a user who only ran ``pip install`` can
generate data, pack it and tune. ``adapt --help`` lists them.
"""

import sys


def main(argv=None):
    """Runs the command line on ``argv`` (default: ``sys.argv[1:]``) and
    returns its exit status."""
    from adapt._adapt import cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    return cli_main(["adapt"] + [str(a) for a in args])


def _script():
    """The ``adapt`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
