"""Settings: the TOML file, environment overrides, the effective view, cache policies."""
