"""The conformance table stays true: every Flink test of the adaptive scheduler is followed,
or deliberately not matched, or has no counterpart, with the reason; the docs show the
table the markers give."""

from __future__ import annotations

from tests.unit.scheduler import conformance as conf


def test_every_marker_names_a_flink_test_that_exists() -> None:
    for ref, followers in conf.followed().items():
        cls, _, member = ref.partition(".")
        assert member, f"{followers}: {ref!r} is not Class.member"
        if cls.endswith(("Test", "ITCase")):
            assert member in conf.FLINK_TESTS.get(cls, ()), f"{followers}: no Flink test {ref}"


def test_every_flink_test_is_followed_or_has_a_reason_and_only_one() -> None:
    followed = conf.followed()
    for cls, tests in conf.FLINK_TESTS.items():
        assert cls in conf.AREAS
        for test in tests:
            ref = f"{cls}.{test}"
            answers = [ref in followed, ref in conf.NOT_MATCHED, ref in conf.NO_COUNTERPART]
            assert sum(answers) == 1, f"{ref}: followed, not matched, no counterpart = {answers}"
    listed = {ref for tests in conf.FLINK_TESTS.items() for ref in _refs(*tests)}
    assert set(conf.NOT_MATCHED) <= listed and set(conf.NO_COUNTERPART) <= listed


def test_the_docs_show_the_table_the_markers_give() -> None:
    text = conf.DOC.read_text(encoding="utf-8")
    start, end = text.index(conf.BEGIN), text.index(conf.END) + len(conf.END) + 1
    assert text[start:end] == conf.table(), (
        "docs/flink-conformance.md is stale: run `python -m tests.unit.scheduler.conformance --write`"
    )


def _refs(cls: str, tests: tuple[str, ...]) -> list[str]:
    return [f"{cls}.{test}" for test in tests]
