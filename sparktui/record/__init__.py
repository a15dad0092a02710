"""Recording, replay, the black box and exports (docs/record.md).

- ``types``: what a recording holds (``Kind``, ``Record``, the payloads that are not the model's own);
- ``delta``: line deltas, a /metrics body as the changes from the previous one;
- ``codec``: records in and out of blobs (JSON of the model's dataclasses, chained zlib);
- ``store``: the file (SQLite), its writer and its reader;
- ``recorder``: ``Recorder``, a ``FleetSink`` that writes everything collected, off the event loop;
- ``blackbox``: ``BlackBox``, a recorder that keeps only the minutes around incidents;
- ``replay``: ``ReplaySource``, a recording as a ``FleetSource`` (it drives the monitor core's ticks);
- ``export``: the derived numbers per node per tick, as JSON lines or CSV;

It uses the model, the monitor core and the sources' protocols; it never imports the UI or the CLI.
"""

# Retention defaults of a recording file (here, so the command line reads them without the model).
DEFAULT_MAX_AGE_S = 7 * 86400.0
DEFAULT_MAX_BYTES = 1024**3
