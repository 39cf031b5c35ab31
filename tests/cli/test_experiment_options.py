"""The option helpers the experiment scripts share (``softsnake.cli.common``)."""

import argparse

import pytest

from softsnake.cli.common import chosen_variants

KNOWN = {"gait": None, "converged": None, "friction_x10": None}


def test_chosen_variants_default_to_every_known_name():
    assert chosen_variants(argparse.ArgumentParser(), None, KNOWN) == ["gait", "converged", "friction_x10"]


def test_chosen_variants_keep_the_order_given_and_skip_blanks():
    assert chosen_variants(argparse.ArgumentParser(), " friction_x10,,gait ", KNOWN) == ["friction_x10", "gait"]


def test_an_unknown_variant_is_one_line_naming_it_and_the_known_ones(capsys):
    with pytest.raises(SystemExit) as stop:
        chosen_variants(argparse.ArgumentParser(prog="causes"), "gait,nope", KNOWN)
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == "causes: error: unknown variant(s) nope; known: gait, converged, friction_x10"
