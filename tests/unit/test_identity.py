"""Identities compared after NFKC and case folding, with a strict allowlist (trajpub/identity.py): every lookalike
of a name is either that name or refused, naming the character that is not allowed."""

from __future__ import annotations

import pytest

from trajpub.errors import ParameterError
from trajpub.identity import canonical_identity
from trajpub.spec import ReleaseSpec

BBOX = [116.0, 39.6, 116.8, 40.2]


@pytest.mark.parametrize(("name", "character"), [
    ("alice\u200b", "U+200B ZERO WIDTH SPACE (an invisible format character)"),
    ("al\u200dice", "U+200D ZERO WIDTH JOINER (an invisible format character)"),
    ("alice\u00ad", "U+00AD SOFT HYPHEN (an invisible format character)"),
    ("\ufeffalice", "U+FEFF ZERO WIDTH NO-BREAK SPACE (an invisible format character)"),
    ("alice\u00a0", "U+00A0 NO-BREAK SPACE"),  # NFKC makes it a space, which is not allowed either
    ("alice\t", "U+0009 unnamed (a control character)"),
    (" alice", "U+0020 SPACE (a space)"),
    ("\u0430lice", "U+0430 CYRILLIC SMALL LETTER A (a letter of another script or a symbol)"),
    ("alic\u0435", "U+0435 CYRILLIC SMALL LETTER IE"),
    ("\u03b1lice", "U+03B1 GREEK SMALL LETTER ALPHA"),
    ("alice\u0301", "U+0301 COMBINING ACUTE ACCENT (a combining mark)"),
    ("alic\u00e9", "U+00E9 LATIN SMALL LETTER E WITH ACUTE"),
    ("alice\n", "U+000A unnamed (a control character)"),
    ("alice@example", "U+0040 COMMERCIAL AT (not an ASCII letter or digit)"),
])
def test_a_lookalike_is_refused_naming_the_character(name, character):
    with pytest.raises(ParameterError, match="requested_by") as refusal:
        canonical_identity(name)
    assert character in refusal.value.message
    assert "\u200b" not in refusal.value.message and "\t" not in refusal.value.message  # what is shown, shows


@pytest.mark.parametrize("name", ["alice", "Alice", "ALICE", "\uff41lice", "\uff21\uff2c\uff29\uff23\uff25"])
def test_case_and_width_fold_to_one_identity(name):
    assert canonical_identity(name) == "alice"


def test_compatibility_characters_fold_as_nfkc_says():
    assert canonical_identity("\u212aelvin") == "kelvin"  # KELVIN SIGN
    assert canonical_identity("demo-engineer.2") == "demo-engineer.2"


@pytest.mark.parametrize("value", [["alice"], 42, 4.2, None, {"name": "alice"}, True])
def test_only_a_string_names_a_person(value):
    with pytest.raises(ParameterError, match="must be one name"):
        canonical_identity(value)


@pytest.mark.parametrize("name", ["", "9lives", "-alice", "a" * 64])
def test_an_identity_starts_with_a_letter_and_fits_a_role_name(name):
    with pytest.raises(ParameterError, match="is not an identity"):
        canonical_identity(name)
    assert canonical_identity("a" * 63) == "a" * 63


@pytest.mark.parametrize("requested_by", [["alice", "bob"], 7, "alice\u200b", "\u0430lice"])
def test_a_spec_refuses_a_requester_that_is_not_one_identity(requested_by):
    with pytest.raises(ParameterError) as refusal:
        ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "requested_by": requested_by})
    assert refusal.value.where == "requested_by"


def test_a_spec_keeps_the_requester_canonical():
    assert ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "requested_by": "\uff24emo"}).requested_by == "demo"
