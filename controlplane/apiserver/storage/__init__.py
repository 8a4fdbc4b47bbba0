"""What the API server puts between its registry and the storage interface: the watch caches
reads are served from (``watchcache``, upstream's cacher) and encryption at rest
(``encryption``, upstream's ``storage/value/encrypt``)."""
