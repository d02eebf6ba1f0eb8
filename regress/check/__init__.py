"""The ``regress check`` application: contract scenarios run on a source tree through the sandbox.

It owns what is checked and how it is judged and reported: the scenarios (``scenarios``,
``draft_scenarios``, ``stale_state``), listed once as records (``catalog``); the one seam to
upstream's draft-loop caller (``caller``, ``stale_loop``); judging one checkpoint (``steps``); the
status vocabulary and its one table of exit and git-bisect codes (``status``); a scenario's result
and the report, with their JSON forms (``results``, ``report``); the ``--known`` findings file
(``known``); the markdown job summary (``summary``); running the check, in a child process
(``check``, ``isolation``, ``child``); and what is built on it: the bisect recipes (``recipes``)
and the pytest plugin's ``--trtllm-src`` (``plugin``). It runs upstream's code only through
:mod:`regress.sandbox` and knows the tree only through :mod:`regress.tree`.
"""
