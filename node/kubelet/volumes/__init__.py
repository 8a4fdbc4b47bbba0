"""Pod volumes on the node: what their files contain (``sources``), how the files are
published without readers seeing a half-written set (``atomic``), and the manager that sets
volumes up, keeps them current and removes them (``manager``)."""
