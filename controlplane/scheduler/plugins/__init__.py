"""The default plugins, one module each; ``registry`` maps their names to factories."""
