"""Operations over a whole lake, built on the storage engine: episode edits and their undo
(``edits``), purge (``purge``), changing columns of stored rows (``updates``), where training
data came from (``lineage``), the job record of every long job (``jobs``), people and roles
(``users``), who changed what (``audit``) and housekeeping threads (``background``); and the
named reads the API's pages ask for, so no route writes SQL: ``episode_reads`` (a step's row,
an episode's branches, the ids a filter selects), ``episode_groups`` (GRPO/GiGPO groups and
the trainer's advantage inputs), ``episode_stats`` (the task tree and the charts),
``overview`` (the landing page's numbers) and ``runs`` (training and collection runs).

The storage engine (``lake/storage``) never imports from here; an import contract in
pyproject.toml keeps it so."""
