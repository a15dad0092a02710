"""Recording, replay, the black box and exports (docs/record.md).

- ``store``: the file (SQLite), its codecs and its reader;
- ``recorder``: ``Recorder``, a ``FleetSink`` that writes everything collected, off the event loop;
- ``blackbox``: ``BlackBox``, a recorder that keeps only the minutes around incidents;
- ``replay``: ``ReplaySource``, a recording as a ``FleetSource``, and ``ModelSink``, the model it drives;
- ``export``: the derived numbers per node per tick, as JSON lines or CSV;

It uses the model and the sources' protocols; it never imports the UI or the CLI.
"""

# Retention defaults of a recording file (here, so the command line reads them without the model).
DEFAULT_MAX_AGE_S = 7 * 86400.0
DEFAULT_MAX_BYTES = 1024**3
