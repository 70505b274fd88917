"""FLIP-487's rescale REST API and a web page, served over the history's committed Delta tables.

`flinkjson` turns table rows into Flink 2.3's JSON (pure), `store` reads the tables
with delta-rs and pyarrow (no JVM) and caches them by Delta version, `routes` maps
a request to an answer, `pages` renders the web page, `server` is the HTTP shell.
"""
