"""Storage for the API server: one revisioned key-value interface, SQLite and etcd behind it."""
