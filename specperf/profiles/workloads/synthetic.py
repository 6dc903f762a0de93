"""The GPQA stand-in: simple, obviously synthetic four-choice science questions with GPQA's
field names (GPQA's authors ask that real items not be published, so none ship with the suite)."""

from __future__ import annotations

from typing import Any


def _num(x: float) -> str:
    return f"{x:.4g}"


# (id stem, question template, unit, correct, three wrong formulas, parameter sets)
_SYNTHETIC_KINDS: tuple[tuple[Any, ...], ...] = (
    (
        "distance",
        "A cart moves in a straight line at a constant {0} m/s for {1} s. How far does it travel?",
        "m",
        lambda v, t: v * t,
        (lambda v, t: v + t, lambda v, t: v / t, lambda v, t: 2 * v * t),
        ((3, 4), (6, 5)),
    ),
    (
        "voltage",
        "A current of {0} A flows through a resistor of {1} ohm. What is the voltage across the resistor?",
        "V",
        lambda i, r: i * r,
        (lambda i, r: r / i, lambda i, r: i + r, lambda i, r: i * r * r),
        ((2, 10), (0.5, 8)),
    ),
    (
        "force",
        "A net force accelerates a {0} kg mass at {1} m/s^2. What is the magnitude of the force?",
        "N",
        lambda m, a: m * a,
        (lambda m, a: m + a, lambda m, a: m / a, lambda m, a: m * a * a),
        ((5, 3), (2, 9)),
    ),
    (
        "kinetic-energy",
        "A {0} kg ball moves at {1} m/s. What is its kinetic energy?",
        "J",
        lambda m, v: 0.5 * m * v * v,
        (lambda m, v: m * v * v, lambda m, v: m * v, lambda m, v: 0.5 * m * v),
        ((2, 3), (4, 5)),
    ),
    (
        "density",
        "A block has a mass of {0} g and a volume of {1} cm^3. What is its density?",
        "g/cm^3",
        lambda m, vol: m / vol,
        (lambda m, vol: vol / m, lambda m, vol: m * vol, lambda m, vol: m - vol),
        ((54, 20), (89, 10)),
    ),
    (
        "power",
        "A device draws {0} A from a {1} V supply. What power does it use?",
        "W",
        lambda i, v: v * i,
        (lambda i, v: v / i, lambda i, v: v + i, lambda i, v: v * i * i),
        ((2, 12), (5, 230)),
    ),
    (
        "moles",
        "How many moles of water (molar mass 18 g/mol) are in {0} g of water?",
        "mol",
        lambda m: m / 18,
        (lambda m: m * 18, lambda m: 18 / m, lambda m: m / 9),
        ((36,), (9,)),
    ),
    (
        "frequency",
        "A pendulum completes one full cycle every {0} s. What is its frequency?",
        "Hz",
        lambda t: 1 / t,
        (lambda t: t, lambda t: 2 / t, lambda t: 2 * t),
        ((0.5,), (4,)),
    ),
    (
        "wave-speed",
        "A wave has a frequency of {0} Hz and a wavelength of {1} m. What is its speed?",
        "m/s",
        lambda f, lam: f * lam,
        (lambda f, lam: f / lam, lambda f, lam: f + lam, lambda f, lam: lam / f),
        ((10, 2), (50, 4)),
    ),
    (
        "length-conversion",
        "How many metres are there in {0} km?",
        "m",
        lambda x: x * 1000,
        (lambda x: x * 100, lambda x: x * 10, lambda x: x / 1000),
        ((3,), (0.25,)),
    ),
)


def synthetic_gpqa_records() -> list[dict[str, str]]:
    """Twenty synthetic four-choice questions with GPQA's field names (deterministic)."""
    records: list[dict[str, str]] = []
    for stem, question, unit, correct, wrong, param_sets in _SYNTHETIC_KINDS:
        for k, params in enumerate(param_sets, start=1):
            shown = [_num(p) for p in params]
            answers = [f"{_num(fn(*params))} {unit}" for fn in (correct, *wrong)]
            records.append(
                {
                    "id": f"synthetic-gpqa-{stem}-{k}",
                    "question": question.format(*shown),
                    "correct_answer": answers[0],
                    "incorrect_answer_1": answers[1],
                    "incorrect_answer_2": answers[2],
                    "incorrect_answer_3": answers[3],
                }
            )
    return records
