"""What the pytest plugin decides about a run, apart from its hooks (plugin.py): one module per
question (run, profile, checks, selection)."""
