"""The `ta-actors` command line."""
