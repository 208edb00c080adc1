"""Profiling: sessions that make the cards record every task, and
what turns the records into msprof's output.

- ``session.py``: a profiling run (``PROF_*`` directory, one trace reader per card, the drain
  thread writing raw data as it goes);
- ``model.py``: a run loaded back from its raw data (tasks, waits linked to their records,
  counters, host API calls, msproftx, log lines);
- ``export.py``: ``mindstudio_profiler_output/`` (Chrome trace JSON, CSVs, waits report);
- ``waits.py``: the waits report and its two diagnoses; ``plot.py``: the matplotlib picture.

The faces start sessions: ``acl.prof`` (``host/acl/prof.py``), ``profile()``
(``host/api/prof.py``) and ``npuemu msprof`` (``tools/msprof.py``). The card side is
``device/trace.py``; the ring's layout is ``shared/trace.py``; the host reads it through
``host/driver/trace.py``.
"""
