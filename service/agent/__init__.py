"""``servesize-agent``: measures a GPU and uploads the results to a servesize server."""
