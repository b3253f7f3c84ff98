"""Shared building blocks of the specs: the strict base model and small value types.

Pure data: nothing here touches the network, the cloud libraries or the file system.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, GetCoreSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

from rlcloud.errors import excerpt

DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME_LENGTH = 40


class StrictModel(BaseModel):
    """Base of every spec: unknown keys are errors, instances are immutable, defaults are validated."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=True,
        use_attribute_docstrings=False,
        populate_by_name=True,
    )


def _refuse_bool(value: Any) -> Any:
    # pydantic's lax int reads true as 1: `total_timesteps: true` must not mean "one timestep"
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "expected a number, not true/false")
    return value


#: Metadata for a numeric field: refuse booleans where a number is meant (``Annotated[int, NOT_BOOL]``).
NOT_BOOL = BeforeValidator(_refuse_bool)


def why(reason: str) -> dict[str, Any]:
    """``json_schema_extra`` for a bounded field: the reason for its limits, which error messages and the
    spec reference quote (``Field(..., le=256, json_schema_extra=why("..."))``)."""
    return {"limit_reason": reason}


def check_dns_label(value: str, *, what: str = "name") -> str:
    """Validate a DNS-1123 label of at most MAX_NAME_LENGTH characters (it becomes Kubernetes and GKE names)."""
    if not isinstance(value, str) or not value:
        raise PydanticCustomError("dns_label", f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise PydanticCustomError(
            "dns_label",
            f"{what} must be at most {MAX_NAME_LENGTH} characters (it prefixes Kubernetes and GKE names); "
            f"got {len(value)}",
        )
    if not DNS_LABEL_RE.match(value):
        hint = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-") or "my-name"
        if not hint[0].isalpha():
            hint = "x-" + hint
        raise PydanticCustomError(
            "dns_label",
            f"{what} must be a DNS-1123 label: lowercase letters, digits and '-', starting with a letter "
            f"and ending with a letter or digit (e.g. {hint!r})",
        )
    return value


def _parsed_value_schema(parse: Callable[[Any], Any], error_type: str) -> core_schema.CoreSchema:
    """A pydantic schema for a value type read by ``parse`` (a string or a number in files) and written back
    as its string form; parse's ValueError becomes a validation error with its message."""

    def validate(raw: Any) -> Any:
        try:
            return parse(raw)
        except ValueError as exc:
            raise PydanticCustomError(error_type, str(exc)) from None

    return core_schema.no_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(str),
        json_schema_input_schema=core_schema.union_schema([core_schema.str_schema(), core_schema.int_schema()]),
    )


#: Largest frequency value: 10^12 timesteps is years of training at the fastest measured rates.
MAX_FREQUENCY = 10**12

_FREQ_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")
_FREQ_UNITS = {
    "": ("s", 1),
    "s": ("s", 1),
    "sec": ("s", 1),
    "m": ("s", 60),
    "min": ("s", 60),
    "h": ("s", 3600),
    "e": ("e", 1),
    "t": ("t", 1),
}


@dataclass(frozen=True, order=True)
class Frequency:
    """How often something happens: every ``value`` seconds (s), episodes (e) or timesteps (t).

    Parsed from "600s", "100e", "5000t", "10m", "1h"; a bare number means seconds (as in
    tensorforce-client's files). Serialised as its string form, e.g. "600s".
    """

    value: int
    unit: Literal["s", "e", "t"]

    UNIT_NAMES: ClassVar[dict[str, str]] = {"s": "seconds", "e": "episodes", "t": "timesteps"}

    def __str__(self) -> str:
        return f"{self.value}{self.unit}"

    @classmethod
    def parse(cls, raw: Any) -> Frequency:
        """Parse a frequency from a string or number; raises ValueError with the valid forms."""
        if isinstance(raw, Frequency):
            return raw
        if isinstance(raw, bool):
            raise ValueError("a frequency must be a number of seconds or a string like '600s', '100e', '5000t'")
        if isinstance(raw, int | float):
            text = str(raw)
        elif isinstance(raw, str):
            text = raw.lower()
        else:
            raise ValueError("a frequency must be a number of seconds or a string like '600s', '100e', '5000t'")
        match = _FREQ_RE.match(text)
        if not match or match.group(2) not in _FREQ_UNITS:
            raise ValueError(
                f"cannot read {excerpt(raw)} as a frequency: use seconds ('600s' or 600, also '10m', '1h'), "
                "episodes ('100e') or timesteps ('5000t')"
            )
        unit, factor = _FREQ_UNITS[match.group(2)]
        number = float(match.group(1)) * factor
        if number > MAX_FREQUENCY:
            # checked before int(): a 400-digit number is inf as a float, which int() cannot convert
            raise ValueError(
                f"a frequency must be at most {MAX_FREQUENCY:,} {cls.UNIT_NAMES[unit]} (more than any run lasts)"
            )
        if number != int(number) or number < 1:
            raise ValueError(f"a frequency must be a whole number >= 1 of {cls.UNIT_NAMES[unit]}")
        return cls(int(number), unit)  # type: ignore[arg-type]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return _parsed_value_schema(cls.parse, "frequency")


#: Longest duration (a cluster's ttl): a year.
MAX_DURATION = 365 * 86400

_DURATION_RE = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_DURATION_FACTORS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, order=True)
class Duration:
    """A length of time such as "90s", "30m", "6h" or "2d" (a bare number means seconds)."""

    seconds: int

    def __str__(self) -> str:
        for unit in ("d", "h", "m"):
            factor = _DURATION_FACTORS[unit]
            if self.seconds % factor == 0:
                return f"{self.seconds // factor}{unit}"
        return f"{self.seconds}s"

    @classmethod
    def parse(cls, raw: Any) -> Duration:
        """Parse a duration; raises ValueError naming the valid forms."""
        if isinstance(raw, Duration):
            return raw
        if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
            seconds = raw
        else:
            match = _DURATION_RE.match(raw.lower()) if isinstance(raw, str) and len(raw) < 32 else None
            if not match or int(match.group(1)) < 1:
                raise ValueError(f"cannot read {excerpt(raw)} as a duration: use e.g. '90s', '30m', '6h' or '2d'")
            seconds = int(match.group(1)) * _DURATION_FACTORS[match.group(2)]
        if seconds > MAX_DURATION:
            raise ValueError(f"a duration must be at most {MAX_DURATION // 86400} days (a longer one is a typo)")
        return cls(seconds)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return _parsed_value_schema(cls.parse, "duration")


# Kubernetes resource quantities ("500m", "2", "4Gi", "1.5G"); a looser check than the apiserver's,
# which catches typos such as "4GB" before anything is submitted.
QUANTITY_RE = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


#: Largest budget a spec takes, in USD: far above any experiment, low enough that a pasted number (a timestamp,
#: cents for dollars twice over) is an error at validation instead of a cap that never acts.
MAX_BUDGET_USD = 1_000_000.0

_USD_RE = re.compile(r"^\s*\$?\s*(\d+(?:\.\d+)?)\s*(usd|\$)?\s*$")
_USD_FORMS = "a number of US dollars such as 25, 12.5, '25 USD' or '$25'"


@dataclass(frozen=True, order=True)
class Usd:
    """An amount of money in US dollars: a budget. Parsed from ``25``, ``12.5``, ``"25 USD"``, ``"$25"`` (more
    than 0, at most 1,000,000; cents at most). Serialised as ``"25 USD"``. Prices are USD list prices (the
    dated price table of rlcloud.gke.prices), so another currency is refused rather than converted."""

    amount: float

    def __str__(self) -> str:
        text = f"{self.amount:.2f}".rstrip("0").rstrip(".")
        return f"{text} USD"

    @classmethod
    def parse(cls, raw: Any) -> Usd:
        """Parse an amount; raises ValueError naming the valid forms."""
        if isinstance(raw, Usd):
            return raw
        if isinstance(raw, bool):
            raise ValueError(f"a budget is {_USD_FORMS}, not true/false")
        if isinstance(raw, int | float):
            amount = float(raw)
        elif isinstance(raw, str) and len(raw) < 40:
            match = _USD_RE.match(raw.lower())
            if not match:
                other = re.fullmatch(r"\s*[\d.]+\s*[A-Za-z]{3}\s*", raw)
                hint = " (budgets are in USD, the currency of the price table)" if other else ""
                raise ValueError(f"use {_USD_FORMS}{hint}")
            amount = float(match.group(1))
        else:
            raise ValueError(f"use {_USD_FORMS}")
        if not amount > 0 or amount != amount:
            raise ValueError("a budget must be more than 0 USD (leave it out for no budget)")
        if amount > MAX_BUDGET_USD:
            raise ValueError(f"a budget must be at most {MAX_BUDGET_USD:,.0f} USD (a larger one is a typo)")
        if round(amount, 2) != amount:
            raise ValueError("a budget is whole cents at most (e.g. 12.5 or 12.25)")
        return cls(amount)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return _parsed_value_schema(cls.parse, "budget")


#: The description of the ``budget`` field every spec that takes one shares (experiment, sweep, cluster).
BUDGET_DESCRIPTION = (
    "A money cap (a [Usd](#usd) amount, e.g. '25 USD' or 25; `budget_usd: 25` is the same). The cost so far is "
    "estimated from node-hours at the dated list prices (GKE) or CPU-hours at rlcloud.yaml's cpu_hour_usd (this "
    "machine; 0: unlimited). At 90% a warning, at 100% the run checkpoints and stops (a sweep stops launching "
    "trials and stops its running ones; a cluster stops its runs, then is deleted). Empty: no cap."
)


def take_budget_alias(data: Any) -> Any:
    """``budget_usd: 25`` is ``budget: 25``: move the alias into place (a ``mode="before"`` model validator's
    step). Both at once is an error on ``budget_usd``: which one was meant cannot be guessed."""
    if not isinstance(data, dict) or "budget_usd" not in data:
        return data
    if data.get("budget") is not None and data.get("budget_usd") is not None:
        raise PydanticCustomError("at:budget_usd", "give budget or budget_usd (the same field, in USD), not both")
    data = dict(data)
    alias = data.pop("budget_usd")
    if data.get("budget") is None:
        data["budget"] = alias
    return data
