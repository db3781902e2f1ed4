"""The conformance report: every broken rule, grouped by check, readable at a glance."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import ConformanceError, InteractionValidationError

__all__ = ["CHECKS", "ConformanceReport", "Violation"]

CHECKS = (
    "spec",
    "config",
    "lifecycle",
    "results",
    "scores",
    "messages",
    "unknown_session",
    "reuse",
    "isolation",
    "state",
    "blocking",
)
"""The names of the checks :func:`check_interaction` runs, in order; ``skip=`` takes them."""


class Violation(NamedTuple):
    """One broken rule: the check it belongs to and what is wrong."""

    check: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


class ConformanceReport:
    """The outcome of :func:`check_interaction`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.checks_run: list[str] = []
        self.violations: list[Violation] = []
        self.notes: list[str] = []
        self._counts: dict[Violation, int] = {}
        self._keys: dict[tuple[str, str], Violation] = {}

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, check: str, message: str, key: str | None = None) -> None:
        """Record a violation; a repeated one is counted, not listed twice.

        ``key`` identifies the rule when the message names a place (episode, turn)
        so the same fault seen in many places is listed once, at its first place.
        """
        ident = (check, key if key is not None else message)
        first = self._keys.get(ident)
        if first is not None:
            self._counts[first] += 1
            return
        violation = Violation(check, message)
        self._keys[ident] = violation
        self._counts[violation] = 1
        self.violations.append(violation)

    def format(self) -> str:
        """The readable report: one line per violation, then notes."""
        if self.ok:
            head = f"{self.label} passed {len(self.checks_run)} conformance checks"
            lines = [head + (f" ({', '.join(self.checks_run)})" if self.checks_run else "")]
        else:
            failed = sorted({v.check for v in self.violations}, key=_check_order)
            count = len(self.violations)
            lines = [
                f"{self.label} broke {count} conformance rule{'s' if count != 1 else ''} "
                f"(failed checks: {', '.join(failed)}):"
            ]
            for v in sorted(self.violations, key=lambda v: _check_order(v.check)):
                times = self._counts[v]
                more = (
                    f" (and {times - 1} more time{'s' if times > 2 else ''})" if times > 1 else ""
                )
                lines.append(f"  - {v}{more}")
        lines += [f"  note: {n}" for n in self.notes]
        if not self.ok:
            lines.append(
                "  See docs/writing-plugins.md (section 'The conformance checker') for each rule."
            )
        return "\n".join(lines)

    def raise_for_violations(self) -> ConformanceReport:
        """Raise :class:`ConformanceError` when there is any violation; else return ``self``."""
        if self.violations:
            raise ConformanceError(self.format(), self.violations)
        return self

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"<ConformanceReport {self.label} violations={len(self.violations)}>"


def _check_order(check: str) -> int:
    return CHECKS.index(check) if check in CHECKS else len(CHECKS)


def record_spec(report: ConformanceReport, exc: InteractionValidationError) -> None:
    lines = [ln.strip()[2:] for ln in str(exc).splitlines() if ln.strip().startswith("- ")]
    for line in lines or [str(exc)]:
        report.add("spec", line)
