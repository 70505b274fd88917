"""The scheduler service's imperative shell: Faust app, table, timers, dead letters."""
