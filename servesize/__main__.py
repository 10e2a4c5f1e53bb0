"""``python -m service`` runs the ``servesize`` command."""

from servesize.cli import main

main()
