"""Recovery actions: restart, drop caches, kill stale workers, warmup.

``sparktui.actions.plans`` decides what to run (pure: exact commands, order, targets, timeouts, or a
one-line refusal); ``sparktui.actions.runner`` runs a plan over SSH and HTTP, one action at a time per
node, with progress, results and the audit log of ``sparktui.actions.audit``. docs/actions.md has the
sequences, the checks and how to allow the ``sudo -n`` commands on a node.
"""
