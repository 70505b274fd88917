"""User-facing tools of the `scalefold` command that are not a service."""
