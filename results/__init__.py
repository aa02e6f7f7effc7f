"""Run records (one JSON file per run) and the figures derived from them."""
