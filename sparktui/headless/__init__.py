"""The headless apps beside ``sparktui.ui``: what the commands without a screen run.

- ``snapshot``: collect the fleet twice and render ``snapshot`` / ``check`` (text or JSON, exit codes);
- ``watch``: the dashboard's collection and rules with no screen, sending alerts (``sparktui watch``);
- ``compare``: ``snapshot --compare``, sparktui's numbers beside Prometheus's;
- ``action``: the terminal flow of ``sparktui action`` (plan, confirm, run, result);
- ``init``: probe hosts, render the config with ``sparktui.discovery``, validate it, write the file.

None of them imports textual, rich or ``sparktui.ui`` (import-linter and tests/integration/test_import_hygiene.py).
"""
