"""``python -m service`` runs the ``servesize`` command."""

from service.cli import main

main()
