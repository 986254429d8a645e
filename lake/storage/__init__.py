"""The storage engine: the Arrow schema (``schema``, ``rows``), Lance tables (``tables``), the
crash-safe write path (``spool``, ``writer``, ``committer``, ``group_commit``, ``claims``,
``conflicts``), a lake's location (``store``, ``layout``), SQL over every table (``sql``), image
formats (``images``), the product's error family (``errors``) and the `Lake` front object
(``lake``). It imports nothing from the rest of the lake."""
