"""``python -m dal.cli``: the ``dal`` command."""

from dal.cli import main

main()
