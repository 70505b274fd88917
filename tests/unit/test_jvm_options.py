"""`SCALEFOLD_JVM_OPTIONS`: split as a shell would, nothing when unset."""

from services.localstack.jvm import JVM_OPTIONS_ENV, extra_jvm_options


def test_the_options_are_split_as_a_shell_would() -> None:
    environ = {JVM_OPTIONS_ENV: "-XX:TieredStopAtLevel=1  '-Dname=a b' -XX:+UseSerialGC"}
    assert extra_jvm_options(environ) == [
        "-XX:TieredStopAtLevel=1",
        "-Dname=a b",
        "-XX:+UseSerialGC",
    ]


def test_unset_or_empty_adds_nothing() -> None:
    assert extra_jvm_options({}) == []
    assert extra_jvm_options({JVM_OPTIONS_ENV: "  "}) == []
