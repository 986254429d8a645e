"""Operations over a whole lake, built on the storage engine: episode edits and their undo
(``edits``), purge (``purge``), changing columns of stored rows (``updates``), where training
data came from (``lineage``), the job record of every long job (``jobs``), people and roles
(``users``), who changed what (``audit``) and housekeeping threads (``background``).

The storage engine (``lake/storage``) never imports from here; an import contract in
pyproject.toml keeps it so."""
