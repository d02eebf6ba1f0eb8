"""Option types of the CLI: numbers that must be finite, batch-size lists.

click's ``FloatRange`` lets ``nan`` through (every comparison with nan is false, so no bound
refuses it) and ``inf`` through an open range; a detector then raised ``ValueError`` deep inside
(an internal error) or, worse, ran with it. These types refuse both as usage errors naming the
option, like every other bad value.
"""

from __future__ import annotations

import math
import shlex

import click

#: A seed: what torch's and Python's generators take (a negative or a 20-digit one is a typo).
SEED = click.IntRange(0, 2**63 - 1)


def shell_words(text: str, *, option: str, example: str) -> list[str]:
    """``text`` split as a POSIX shell splits it; unbalanced quotes are a usage error.

    Args:
        option: the option that carried it, named in the message.
        example: a well-formed value to show.
    """
    from regress.errors import UsageError

    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise UsageError(
            f"{option} {text!r}: {str(exc).lower()}; quote it as a shell would, e.g. {example}"
        ) from None


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
