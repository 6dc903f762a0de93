"""What the pytest plugin decides about a run, apart from its hooks (plugin.py): one module per
question (scope, profile, checks, selection, gpus, machine, progress, outcomes, benchmark, closing)."""
