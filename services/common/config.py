"""Typed configuration: declaring config classes with Kafka's key names, types and defaults; loading them.

Declaring. A config class subclasses `Config` and declares one field per Kafka key with
`setting(type, default, *validators, doc=...)`. The attribute is the snake_case form of the dotted
key (`log_segment_bytes` is `log.segment.bytes`; pass `key=` when that does not hold). The class
becomes a frozen, keyword-only dataclass:

    class LogSettings(Config):
        log_segment_bytes: int = setting(ConfigType.INT, 1073741824, at_least(14),
                                         doc="Maximum size of one segment file.")
        log_retention_hours: int = setting(ConfigType.INT, 168)
        log_cleanup_policy: tuple[str, ...] = setting(ConfigType.LIST, "delete",
                                                      each_one_of("compact", "delete"))
        zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED)

Types follow Kafka's ConfigDef: BOOLEAN ("true"/"false", any case), STRING, SHORT/INT/LONG
(16/32/64-bit signed, range-checked), DOUBLE, LIST (comma-separated, whitespace around commas
dropped, "" is empty; held as a tuple), PASSWORD (a string hidden in repr and `as_dict`). Strings
are trimmed and parsed; Python values of the right type pass as they are. Defaults are parsed
the same way. `REQUIRED` marks a key with no default; a default of None makes a key nullable.
Validators (`at_least`, `at_most`, `between`, `one_of`, `each_one_of`, `non_empty`) run on every
value. Any failure raises `ConfigError`, whose message names the dotted key.

Loading. `LogSettings.load(*sources, env=os.environ, **overrides)` applies, later winning:
defaults; each source in order (a path to a Java `.properties` file, or a mapping of dotted keys
to values); keyword overrides in snake_case (`log_segment_bytes=1024`, as clients take them);
then environment variables `ODRADEK_<KEY>` (`ODRADEK_LOG_SEGMENT_BYTES=1048576`; dots and
dashes become underscores). Only declared keys are looked up in the environment; pass `env={}`
to ignore it. Unknown keys are kept (`config.unknown()`), and logged as a warning, never fatal.
Constructing directly, `LogSettings(log_segment_bytes=1024)`, parses and validates the same way
but takes no environment or unknown keys.

Reading. Attributes (`config.log_segment_bytes`), `config.get("log.segment.bytes")`,
`config.as_dict()` (dotted keys, passwords masked), `config.originals()` (every key supplied, as
supplied), `Config.settings()` (the declarations, for documentation and tooling).

Properties files. `parse_properties(text)` and `load_properties(path)` read Java
`java.util.Properties` syntax: `key=value`, `key: value` or `key value`; `#` and `!` comment lines;
a line ending in an odd number of backslashes continues on the next line (its leading whitespace
dropped); escapes `\\t \\n \\r \\f \\uXXXX`, and `\\` before any other character keeps that
character. Files are read as UTF-8 (Java's loader assumes ISO-8859-1; `\\uXXXX` works in both).

Names. `to_dotted("linger_ms") == "linger.ms"`, `to_snake("linger.ms") == "linger_ms"`,
`env_var_name("log.segment.bytes") == "ODRADEK_LOG_SEGMENT_BYTES"`.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self, dataclass_transform

logger = logging.getLogger(__name__)

ENV_PREFIX = "ODRADEK_"
SHORT_MAX = 2**15 - 1  # Java's Short.MAX_VALUE (replication factors, producer epochs)
INT_MAX = 2**31 - 1  # Java's Integer.MAX_VALUE, the default of many INT settings
LONG_MAX = 2**63 - 1  # Java's Long.MAX_VALUE
HIDDEN = "[hidden]"


class ConfigError(ValueError):
    """An invalid or missing configuration value; `key` is the dotted Kafka key."""

    def __init__(self, key: str, value: Any, reason: str, *, hide_value: bool = False) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        shown = HIDDEN if hide_value else repr(value)
        super().__init__(f"Invalid value {shown} for configuration {key}: {reason}")


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    PASSWORD = "password"


# Kafka's ConfigEntry.ConfigType codes, as DescribeConfigs answers them (0 is unknown, 8 a class name)
CONFIG_TYPE_CODES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.PASSWORD: 9,
}


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

Validator = Callable[[str, Any], None]

_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*")
_METADATA_KEY = "odradek.config"


# ---------------------------------------------------------------------------------------------
# names


def to_dotted(name: str) -> str:
    """snake_case keyword name to Kafka's dotted key: `linger_ms` -> `linger.ms`."""
    return name.replace("_", ".")


def to_snake(key: str) -> str:
    """Kafka's dotted key to its snake_case attribute name: `linger.ms` -> `linger_ms`."""
    return key.replace(".", "_").replace("-", "_")


def env_var_name(key: str, prefix: str = ENV_PREFIX) -> str:
    """The environment variable that overrides `key`: `log.segment.bytes` -> `ODRADEK_LOG_SEGMENT_BYTES`."""
    return prefix + to_snake(key).upper()


# ---------------------------------------------------------------------------------------------
# types and validators


def parse_value(key: str, kind: ConfigType, value: Any) -> Any:
    """Convert `value` (a string or a Python value) to `kind`, as Kafka's ConfigDef.parseType does."""
    hide = kind is ConfigType.PASSWORD
    text = value.strip() if isinstance(value, str) else None
    if kind is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(key, value, "Expected value to be either true or false")
    if kind in (ConfigType.STRING, ConfigType.PASSWORD):
        if text is None:
            raise ConfigError(key, value, f"Expected a string, got {type(value).__name__}", hide_value=hide)
        return text
    if kind in _INTEGER_BITS:
        return _parse_integer(key, kind, value, text)
    if kind is ConfigType.DOUBLE:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if text is not None and "_" not in text:
            try:
                return float(text)
            except ValueError:
                pass
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    if kind is ConfigType.LIST:
        if isinstance(value, list | tuple):
            return tuple(str(item) for item in value)
        if text is None:
            raise ConfigError(key, value, "Expected a comma separated list")
        return tuple(_COMMA_WITH_WHITESPACE.split(text)) if text else ()
    raise AssertionError(f"unhandled config type {kind}")


def _parse_integer(key: str, kind: ConfigType, value: Any, text: str | None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif text is not None and _INTEGER_TEXT.fullmatch(text):
        number = int(text)
    else:
        raise ConfigError(key, value, f"Not a number of type {kind.name}")
    limit = 1 << (_INTEGER_BITS[kind] - 1)
    if not -limit <= number < limit:
        raise ConfigError(key, value, f"Not a number of type {kind.name} (out of range)")
    return number


def at_least(minimum: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None or value < minimum:
            raise ConfigError(key, value, f"Value must be at least {minimum}")

    return check


def at_most(maximum: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None or value > maximum:
            raise ConfigError(key, value, f"Value must be no more than {maximum}")

    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None or not minimum <= value <= maximum:
            raise ConfigError(key, value, f"Value must be between {minimum} and {maximum}")

    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, value: Any) -> None:
        if value not in choices:
            raise ConfigError(key, value, f"String must be one of: {', '.join(choices)}")

    return check


def each_one_of(*choices: str) -> Validator:
    """For LIST settings: every element must be one of `choices`."""

    def check(key: str, value: Any) -> None:
        for item in value or ():
            if item not in choices:
                raise ConfigError(key, value, f"Item {item!r} must be one of: {', '.join(choices)}")

    return check


def non_empty(key: str, value: Any) -> None:
    if not value:
        raise ConfigError(key, value, "Must not be empty")


# ---------------------------------------------------------------------------------------------
# declarations


@dataclasses.dataclass(frozen=True, slots=True)
class Setting:
    """The declaration of one config key."""

    key: str
    attribute: str
    kind: ConfigType
    default: Any
    validators: tuple[Validator, ...]
    doc: str

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def nullable(self) -> bool:
        return self.default is None

    def convert(self, value: Any) -> Any:
        """Parse and validate one value for this key."""
        if value is REQUIRED:
            raise ConfigError(self.key, None, "Missing required configuration which has no default value")
        if value is None:
            if self.nullable:
                return None
            raise ConfigError(self.key, None, "Value must be non-null")
        try:
            parsed = parse_value(self.key, self.kind, value)
            for validate in self.validators:
                validate(self.key, parsed)
        except ConfigError as e:
            if self.kind is not ConfigType.PASSWORD:
                raise
            raise ConfigError(self.key, None, e.reason, hide_value=True) from None
        return parsed


def setting(
    kind: ConfigType,
    default: Any,
    *validators: Validator,
    doc: str = "",
    key: str | None = None,
) -> Any:
    """Declare a config field of `kind` with Kafka's `default` (REQUIRED for none, None for nullable)."""
    spec = {"kind": kind, "default": default, "validators": tuple(validators), "doc": doc, "key": key}
    hidden = kind is ConfigType.PASSWORD
    return dataclasses.field(default=default, repr=not hidden, metadata={_METADATA_KEY: spec})


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class Config:
    """Base of config classes; see the module docstring."""

    __settings__: ClassVar[dict[str, Setting]] = {}
    __by_attribute__: ClassVar[dict[str, Setting]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        settings: dict[str, Setting] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            spec = field.metadata.get(_METADATA_KEY)
            if spec is None:
                continue
            key = spec["key"] or to_dotted(field.name)
            settings[key] = Setting(
                key, field.name, spec["kind"], spec["default"], spec["validators"], spec["doc"]
            )
        cls.__settings__ = settings
        cls.__by_attribute__ = {s.attribute: s for s in settings.values()}
        for spec in settings.values():
            if not spec.required:
                spec.convert(spec.default)  # a bad default is a bug in the declaration

    def __post_init__(self) -> None:
        for spec in self.__settings__.values():
            object.__setattr__(self, spec.attribute, spec.convert(getattr(self, spec.attribute)))
        object.__setattr__(self, "_originals", {})
        object.__setattr__(self, "_unknown", {})

    @classmethod
    def settings(cls) -> Mapping[str, Setting]:
        """The declared keys, dotted key -> Setting, in declaration order."""
        return dict(cls.__settings__)

    @classmethod
    def load(
        cls,
        *sources: str | os.PathLike[str] | Mapping[str, Any],
        env: Mapping[str, str] = os.environ,
        env_prefix: str = ENV_PREFIX,
        **overrides: Any,
    ) -> Self:
        """Build a config from properties files / mappings, snake_case overrides, then `env`."""
        supplied: dict[str, Any] = {}
        for source in sources:
            if isinstance(source, Mapping):
                supplied.update({str(k): v for k, v in source.items()})
            else:
                supplied.update(load_properties(source))
        for name, value in overrides.items():
            spec = cls.__by_attribute__.get(name)
            supplied[spec.key if spec else to_dotted(name)] = value
        for key in cls.__settings__:
            name = env_var_name(key, env_prefix)
            if name in env:
                supplied[key] = env[name]
        return cls._from_supplied(supplied)

    @classmethod
    def _from_supplied(cls, supplied: dict[str, Any]) -> Self:
        known = {cls.__settings__[k].attribute: v for k, v in supplied.items() if k in cls.__settings__}
        unknown = {k: v for k, v in supplied.items() if k not in cls.__settings__}
        if unknown:
            logger.warning(
                "%s: unknown configuration keys kept but not used: %s",
                cls.__name__,
                ", ".join(sorted(unknown)),
                extra={"config_class": cls.__name__, "unknown_keys": sorted(unknown)},
            )
        config = cls(**known)
        object.__setattr__(config, "_originals", dict(supplied))
        object.__setattr__(config, "_unknown", unknown)
        return config

    def get(self, key: str) -> Any:
        """The value of a declared dotted key, or an unknown key's value as supplied."""
        spec = self.__settings__.get(key)
        if spec is not None:
            return getattr(self, spec.attribute)
        if key in self._unknown:
            return self._unknown[key]
        raise KeyError(key)

    def as_dict(self, *, mask_passwords: bool = True) -> dict[str, Any]:
        """Every declared key with its value (dotted key -> value), passwords masked by default."""
        result = {}
        for key, spec in self.__settings__.items():
            value = getattr(self, spec.attribute)
            hidden = mask_passwords and spec.kind is ConfigType.PASSWORD and value is not None
            result[key] = HIDDEN if hidden else value
        return result

    def originals(self) -> dict[str, Any]:
        """Every key supplied to `load`, known or not, with its value as supplied."""
        return dict(self._originals)

    def unknown(self) -> dict[str, Any]:
        """Keys supplied to `load` that this class does not declare."""
        return dict(self._unknown)

    def describe(self) -> str:
        """One `key = value` line per declared key, sorted, passwords masked (for startup logs)."""
        return "\n".join(f"{key} = {value}" for key, value in sorted(self.as_dict().items()))


# ---------------------------------------------------------------------------------------------
# .properties files

_PROPERTIES_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java `.properties` file (UTF-8)."""
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read(), source=os.fspath(path))


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse Java `.properties` text into key -> value; a repeated key keeps its last value."""
    result: dict[str, str] = {}
    for line_number, logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        try:
            result[_unescape(key)] = _unescape(value)
        except ValueError as e:
            raise ConfigError(key, value, f"{source} line {line_number}: {e}") from None
    return result


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    natural = _LINE_BREAK.split(text)
    index = 0
    while index < len(natural):
        start = index
        line = natural[index].lstrip(_PROPERTIES_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line) and index < len(natural):
            parts.append(line[:-1])
            line = natural[index].lstrip(_PROPERTIES_WHITESPACE)
            index += 1
        parts.append(line[:-1] if _continues(line) else line)
        yield start + 1, "".join(parts)


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=:" or char in _PROPERTIES_WHITESPACE:
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(_PROPERTIES_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_PROPERTIES_WHITESPACE)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index >= len(text):
            out.append(char)
            continue
        escaped = text[index]
        index += 1
        if escaped == "u":
            digits = text[index : index + 4]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"malformed \\uxxxx escape {text[index - 2 : index + 4]!r}")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPED.get(escaped, escaped))
    return "".join(out)
