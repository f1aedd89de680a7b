"""The file store: ``store`` (the class, where the directory is, naming sessions), ``disk`` (journal files, the
writer's lock, appending) and ``catalog`` (the sessions index)."""
