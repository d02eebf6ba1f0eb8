"""The ``regress check`` application: scenarios run on a source tree through the sandbox, and its report.

``check.run_check`` is the library entry point; ``recipes`` are the bisect recipes built on it.
"""
