"""llama.cpp's ``llama-server`` (``scrape``: what it serves, read into the engine-neutral scrape)."""
