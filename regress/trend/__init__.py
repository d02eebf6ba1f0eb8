"""Nightly acceptance history, change points in it, and the bisect each regression starts.

``store`` keeps one report per (commit, night, configuration); ``series`` reads metrics out of
them by path; ``detect`` finds the steps (e-divisive means, as Apache Otava); ``check`` ties them
together for ``regress trend check``; ``bisect`` plans the ``regress bisect run`` over a step's
commits; ``plot`` and ``markdown`` show the result.
"""
