"""``python -m servesize`` runs the ``servesize`` command."""

from servesize.cli import main

main()
