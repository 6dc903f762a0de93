"""What the report works out from typed results, as plain data, one module per analysis: no formatting, no HTML.

Its modules: ``spreads`` (the round spread behind each metric verdict), ``acceptance``
(acceptance pooled over scenarios), ``sd_pays`` (where SD stops paying, and the fastest method),
``memory`` (peak memory against no-SD), ``drift`` (effective-config drift), ``clocks`` (GPU clocks
and throttling) and ``study_figure`` (which panel of the study's figure 1 a scenario matches).
"""
