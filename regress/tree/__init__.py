"""What regress knows about a TensorRT-LLM source tree, read from its files without importing it.

It owns the one era table (``eras``: where the DSA metadata and its base classes are in each
era and which modules run for real), the one detection rule (``source``:
:class:`~regress.tree.source.SourceTree`, resolved once per check and passed on) and the
DSA-family classes and token maps of a tree (``maps``). ``regress check``, the bisect recipes and
the installed-package hooks all ask here, so a tree gets one era whoever asks. It imports
nothing of :mod:`regress.sandbox` or :mod:`regress.check`.
"""
