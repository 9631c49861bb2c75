"""Tests for services.common.config: declaring, parsing, validating and loading configs."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.config import (
    REQUIRED,
    Config,
    ConfigError,
    ConfigType,
    at_least,
    at_most,
    between,
    each_one_of,
    env_var_name,
    non_empty,
    one_of,
    parse_properties,
    parse_value,
    setting,
    to_dotted,
    to_snake,
)


class SampleConfig(Config):
    """A few broker keys with Kafka 2.8's types and defaults."""

    zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED, non_empty)
    zookeeper_session_timeout_ms: int = setting(ConfigType.INT, 18000)
    log_dir: str = setting(ConfigType.STRING, "/tmp/kafka-logs")
    log_dirs: str | None = setting(ConfigType.STRING, None)
    log_segment_bytes: int = setting(ConfigType.INT, 1073741824, at_least(14))
    log_retention_hours: int = setting(ConfigType.INT, 168)
    log_retention_bytes: int = setting(ConfigType.LONG, -1)
    log_cleanup_policy: tuple[str, ...] = setting(ConfigType.LIST, "delete", each_one_of("compact", "delete"))
    log_cleaner_min_cleanable_ratio: float = setting(ConfigType.DOUBLE, 0.5, between(0, 1))
    replica_lag_time_max_ms: int = setting(ConfigType.LONG, 30000)
    min_insync_replicas: int = setting(ConfigType.INT, 1, at_least(1))
    num_partitions: int = setting(ConfigType.INT, 1, at_least(1))
    default_replication_factor: int = setting(ConfigType.INT, 1)
    offsets_topic_num_partitions: int = setting(ConfigType.INT, 50, at_least(1))
    offsets_topic_replication_factor: int = setting(ConfigType.SHORT, 3, at_least(1))
    auto_create_topics_enable: bool = setting(ConfigType.BOOLEAN, True)
    compression_type: str = setting(
        ConfigType.STRING, "producer", one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    )
    ssl_key_password: str | None = setting(ConfigType.PASSWORD, None, non_empty)
    queued_max_requests: int = setting(ConfigType.INT, 500, at_least(1), at_most(100_000), doc="Queue bound.")


ZK = {"zookeeper.connect": "localhost:2181"}
NO_ENV: dict[str, str] = {}


def load(*sources, env=NO_ENV, **overrides) -> SampleConfig:
    return SampleConfig.load(ZK, *sources, env=env, **overrides)


# --- names -----------------------------------------------------------------------------------


def test_name_conversions() -> None:
    assert to_dotted("linger_ms") == "linger.ms"
    assert to_dotted("log_segment_bytes") == "log.segment.bytes"
    assert to_snake("log.segment.bytes") == "log_segment_bytes"
    assert env_var_name("log.segment.bytes") == "ODRADEK_LOG_SEGMENT_BYTES"
    assert env_var_name("linger.ms", prefix="X_") == "X_LINGER_MS"


# --- defaults and declarations -----------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    config = load()
    assert config.log_segment_bytes == 1073741824
    assert config.log_retention_hours == 168
    assert config.replica_lag_time_max_ms == 30000
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.min_insync_replicas == 1
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_topic_replication_factor == 3
    assert config.auto_create_topics_enable is True
    assert config.log_cleanup_policy == ("delete",)
    assert config.log_cleaner_min_cleanable_ratio == 0.5
    assert config.log_dirs is None
    assert config.ssl_key_password is None


def test_settings_describe_the_declarations() -> None:
    settings = SampleConfig.settings()
    spec = settings["log.segment.bytes"]
    assert spec.attribute == "log_segment_bytes"
    assert spec.kind is ConfigType.INT
    assert spec.default == 1073741824
    assert settings["zookeeper.connect"].required
    assert settings["log.dirs"].nullable
    assert settings["queued.max.requests"].doc == "Queue bound."
    assert list(settings)[0] == "zookeeper.connect"


def test_explicit_key_overrides_derived_name() -> None:
    class Odd(Config):
        max_bytes: int = setting(ConfigType.INT, 5, key="weird-name.max.bytes")

    assert list(Odd.settings()) == ["weird-name.max.bytes"]
    assert Odd.load({"weird-name.max.bytes": "7"}, env=NO_ENV).max_bytes == 7
    assert Odd.load(env={"ODRADEK_WEIRD_NAME_MAX_BYTES": "9"}).max_bytes == 9
    assert Odd.load(env=NO_ENV, max_bytes=11).max_bytes == 11


def test_bad_default_fails_at_declaration() -> None:
    with pytest.raises(ConfigError, match="bad.default"):

        class Broken(Config):
            bad_default: int = setting(ConfigType.INT, 0, at_least(1))


def test_subclass_inherits_settings() -> None:
    class Extended(SampleConfig):
        linger_ms: int = setting(ConfigType.LONG, 0, at_least(0))

    config = Extended.load(ZK, env=NO_ENV, linger_ms=5)
    assert config.linger_ms == 5
    assert config.num_partitions == 1
    assert "linger.ms" in Extended.settings()
    assert "linger.ms" not in SampleConfig.settings()


def test_configs_are_frozen_and_comparable() -> None:
    config = load()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_partitions = 3  # type: ignore[misc]
    assert config == load()
    assert dataclasses.replace(config, num_partitions="4").num_partitions == 4
    assert hash(config) == hash(load())


# --- direct construction ---------------------------------------------------------------------


def test_direct_construction_parses_and_validates() -> None:
    config = SampleConfig(zookeeper_connect=" zk:2181 ", log_segment_bytes="1048576")
    assert config.zookeeper_connect == "zk:2181"
    assert config.log_segment_bytes == 1048576
    assert config.unknown() == {}
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        SampleConfig(zookeeper_connect="zk", log_segment_bytes=13)


def test_missing_required_key_names_it() -> None:
    with pytest.raises(ConfigError, match="zookeeper.connect") as excinfo:
        SampleConfig.load(env=NO_ENV)
    assert "no default" in str(excinfo.value)
    assert excinfo.value.key == "zookeeper.connect"


def test_null_only_for_nullable_keys() -> None:
    assert load({"log.dirs": None}).log_dirs is None
    with pytest.raises(ConfigError, match="num.partitions"):
        load({"num.partitions": None})


# --- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        (ConfigType.BOOLEAN, "true", True),
        (ConfigType.BOOLEAN, " FALSE ", False),
        (ConfigType.BOOLEAN, True, True),
        (ConfigType.STRING, "  padded ", "padded"),
        (ConfigType.PASSWORD, "secret", "secret"),
        (ConfigType.SHORT, "32767", 32767),
        (ConfigType.INT, "+42", 42),
        (ConfigType.INT, " -7 ", -7),
        (ConfigType.INT, 2**31 - 1, 2**31 - 1),
        (ConfigType.LONG, "9223372036854775807", 2**63 - 1),
        (ConfigType.LONG, 5, 5),
        (ConfigType.DOUBLE, "0.25", 0.25),
        (ConfigType.DOUBLE, "1e3", 1000.0),
        (ConfigType.DOUBLE, 2, 2.0),
        (ConfigType.LIST, "a, b ,c", ("a", "b", "c")),
        (ConfigType.LIST, "  ", ()),
        (ConfigType.LIST, "a,,b,", ("a", "", "b", "")),
        (ConfigType.LIST, ["x", "y"], ("x", "y")),
    ],
)
def test_parse_value(kind: ConfigType, raw: object, expected: object) -> None:
    assert parse_value("some.key", kind, raw) == expected


@pytest.mark.parametrize(
    ("kind", "raw"),
    [
        (ConfigType.BOOLEAN, "yes"),
        (ConfigType.BOOLEAN, 1),
        (ConfigType.STRING, 5),
        (ConfigType.SHORT, "32768"),
        (ConfigType.INT, "2147483648"),
        (ConfigType.INT, "1.5"),
        (ConfigType.INT, "1_000"),
        (ConfigType.INT, "0x10"),
        (ConfigType.INT, ""),
        (ConfigType.INT, True),
        (ConfigType.INT, 1.0),
        (ConfigType.LONG, str(2**63)),
        (ConfigType.DOUBLE, "abc"),
        (ConfigType.DOUBLE, "1_0"),
        (ConfigType.LIST, 5),
    ],
)
def test_parse_value_rejects(kind: ConfigType, raw: object) -> None:
    with pytest.raises(ConfigError, match="some.key"):
        parse_value("some.key", kind, raw)


def test_validators_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"min\.insync\.replicas: Value must be at least 1"):
        load({"min.insync.replicas": "0"})
    with pytest.raises(ConfigError, match="queued.max.requests: Value must be no more than 100000"):
        load({"queued.max.requests": 100_001})
    with pytest.raises(ConfigError, match="log.cleaner.min.cleanable.ratio: Value must be between 0 and 1"):
        load({"log.cleaner.min.cleanable.ratio": "1.5"})
    with pytest.raises(ConfigError, match="compression.type"):
        load({"compression.type": "brotli"})
    with pytest.raises(ConfigError, match="log.cleanup.policy"):
        load({"log.cleanup.policy": "compact,archive"})
    with pytest.raises(ConfigError, match="zookeeper.connect: Must not be empty"):
        SampleConfig.load({"zookeeper.connect": "  "}, env=NO_ENV)


def test_list_and_choice_values() -> None:
    config = load({"log.cleanup.policy": "compact, delete", "compression.type": "zstd"})
    assert config.log_cleanup_policy == ("compact", "delete")
    assert config.compression_type == "zstd"


def test_passwords_never_shown() -> None:
    config = load({"ssl.key.password": "hunter2"})
    assert config.ssl_key_password == "hunter2"
    assert "hunter2" not in repr(config)
    assert config.as_dict()["ssl.key.password"] == "[hidden]"
    assert config.as_dict(mask_passwords=False)["ssl.key.password"] == "hunter2"
    assert "hunter2" not in config.describe()
    with pytest.raises(ConfigError) as excinfo:
        load({"ssl.key.password": 12345})
    assert "12345" not in str(excinfo.value)
    assert "ssl.key.password" in str(excinfo.value)


# --- loading ---------------------------------------------------------------------------------


def test_load_precedence_file_mapping_keywords_env(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "zookeeper.connect=zk1:2181\n"
        "num.partitions=2\n"
        "default.replication.factor=2\n"
        "min.insync.replicas=2\n"
        "log.retention.hours=24\n",
        encoding="utf-8",
    )
    env = {"ODRADEK_LOG_RETENTION_HOURS": "12", "ODRADEK_UNRELATED": "x", "ODRADEK_LOG_LEVEL": "DEBUG"}
    config = SampleConfig.load(
        path,
        {"num.partitions": 3, "default.replication.factor": "3"},
        env=env,
        default_replication_factor=4,
        log_retention_hours=48,
    )
    assert config.zookeeper_connect == "zk1:2181"
    assert config.min_insync_replicas == 2  # file
    assert config.num_partitions == 3  # mapping over file
    assert config.default_replication_factor == 4  # keyword over mapping
    assert config.log_retention_hours == 12  # environment over everything
    assert config.unknown() == {}


def test_environment_override_is_parsed_and_validated() -> None:
    config = load(env={"ODRADEK_LOG_SEGMENT_BYTES": "1048576", "ODRADEK_AUTO_CREATE_TOPICS_ENABLE": "false"})
    assert config.log_segment_bytes == 1048576
    assert config.auto_create_topics_enable is False
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        load(env={"ODRADEK_LOG_SEGMENT_BYTES": "lots"})


def test_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODRADEK_NUM_PARTITIONS", "6")
    assert SampleConfig.load(ZK).num_partitions == 6


def test_unknown_keys_are_kept_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="services.common.config"):
        config = load({"custom.plugin.setting": "on"}, some_unknown_thing=3)
    assert config.unknown() == {"custom.plugin.setting": "on", "some.unknown.thing": 3}
    assert config.get("custom.plugin.setting") == "on"
    assert config.originals()["zookeeper.connect"] == "localhost:2181"
    assert "custom.plugin.setting" in caplog.text
    assert "some.unknown.thing" in caplog.text


def test_get_and_as_dict() -> None:
    config = load(num_partitions=8)
    assert config.get("num.partitions") == 8
    with pytest.raises(KeyError):
        config.get("not.a.key")
    values = config.as_dict()
    assert values["num.partitions"] == 8
    assert set(values) == set(SampleConfig.settings())
    assert "num.partitions = 8" in config.describe().splitlines()


# --- properties files ------------------------------------------------------------------------


def test_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "plain=value\n"
        "colon: value two\n"
        "spaced   value three\n"
        "  indented.key = padded  \n"
        "empty=\n"
        "bare\n"
        "continued = first, \\\n"
        "    second, \\\n"
        "    third\n"
        "escaped\\=key\\ name=v\n"
        "tabs=a\\tb\\nc\n"
        "unicode=caf\\u00e9\n"
        "backslash=C:\\\\path\\\\\n"
        "# comment ends in backslash \\\n"
        "after.comment=yes\n"
        "dup=1\n"
        "dup=2\n"
        "other\\q=kept\n"
    )
    assert parse_properties(text) == {
        "plain": "value",
        "colon": "value two",
        "spaced": "value three",
        "indented.key": "padded  ",
        "empty": "",
        "bare": "",
        "continued": "first, second, third",
        "escaped=key name": "v",
        "tabs": "a\tb\nc",
        "unicode": "caf\u00e9",
        "backslash": "C:\\path\\",
        "after.comment": "yes",
        "dup": "2",
        "otherq": "kept",
    }


def test_properties_line_endings_and_trailing_continuation() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\nd=4\\") == {"a": "1", "b": "2", "c": "3", "d": "4"}


def test_properties_continued_line_is_not_a_comment() -> None:
    assert parse_properties("k=a\\\n  #not-a-comment\n") == {"k": "a#not-a-comment"}


def test_properties_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("ok=1\nbad=\\u12G4\n", source="x.properties")


def _escape_properties(text: str, is_key: bool) -> str:
    out = []
    for index, char in enumerate(text):
        if char in "\\=:#!" or (char == " " and (is_key or index == 0)):
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif not char.isprintable() or ord(char) > 0x7E:
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else char)
        else:
            out.append(char)
    return "".join(out)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.text(max_size=40),
        max_size=8,
    )
)
def test_properties_round_trip(entries: dict[str, str]) -> None:
    text = "".join(
        f"{_escape_properties(k, True)}={_escape_properties(v, False)}\n" for k, v in entries.items()
    )
    assert parse_properties(text) == entries


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_int_text_round_trip(n: int) -> None:
    assert parse_value("k", ConfigType.INT, str(n)) == n


@given(st.integers().filter(lambda n: not -(2**31) <= n < 2**31))
def test_int_out_of_range_rejected(n: int) -> None:
    with pytest.raises(ConfigError, match="INT"):
        parse_value("k", ConfigType.INT, str(n))
