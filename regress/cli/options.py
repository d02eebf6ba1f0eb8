"""Option types of the CLI: numbers that must be finite, batch-size lists.

click's ``FloatRange`` lets ``nan`` through (every comparison with nan is false, so no bound
refuses it) and ``inf`` through an open range; a detector then raised ``ValueError`` deep inside
(an internal error) or, worse, ran with it. These types refuse both as usage errors naming the
option, like every other bad value.
"""

from __future__ import annotations

import math

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf``."""

    name = "float range"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class FiniteFloat(click.ParamType):
    """A float that must be finite (no range)."""

    name = "float"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class BatchSizes(click.ParamType):
    """Batch sizes, comma-separated positive integers like ``1,8``: sorted, duplicates dropped.

    An empty item (``1,2,`` or ``1,,8``) is refused: it is a typo, not "nothing".
    """

    name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        items = [v.strip() for v in str(value).split(",")]
        if any(not v for v in items):
            self.fail(
                f"{value!r} has an empty item; give comma-separated positive integers like 1,8",
                param,
                ctx,
            )
        try:
            numbers = [int(v) for v in items]
        except ValueError:
            self.fail(f"expected comma-separated integers like 1,8, got {value!r}", param, ctx)
        if min(numbers) < 1:
            self.fail(f"batch sizes must be positive integers, got {value!r}", param, ctx)
        return sorted(set(numbers))
