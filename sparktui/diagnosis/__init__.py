"""Diagnosis: the failure catalogue as data (``catalogue``), its detectors (``engine``) and the alert
rules judged on views and findings (``alerts``). Pure; the caller loads the catalogue's file."""
