"""``schema.py``: an interaction's ``config:`` checked against its attrs schema, with hints."""

from __future__ import annotations

from core_helpers import check


def test_misspelt_option_and_choice_get_a_did_you_mean(tmp_path, capsys):
    lines = check(
        tmp_path,
        capsys,
        "interaction:\n  - name: gsm8k\n    config:\n      metod: strict\n      method: flexibel\n",
    )
    text = "\n".join(lines)
    assert "c.yaml:4: interaction[0].config.metod: unknown option 'metod' (did you mean " in text
    assert "'method'?); allowed options: method" in text
    assert "c.yaml:5: interaction[0].config.method:" in text
    assert "got str 'flexibel'; did you mean 'flexible'?" in text


def test_a_far_off_value_gets_no_guess(tmp_path, capsys):
    text = "\n".join(
        check(tmp_path, capsys, "interaction:\n  - name: gsm8k\n    config: {method: zz}\n")
    )
    assert "got str 'zz'" in text and "did you mean" not in text
