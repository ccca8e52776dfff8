"""Who asks for a release and who decides on it: the identities four-eyes compares (docs/design.md, "Identities").

An identity (a steward's login, a registered requester, a release's ``requested_by``) is compared in its
canonical form: the name in Unicode normalisation form NFKC (UAX #15), then lower-cased; and the NFKC form may
hold only ASCII letters, digits, ``_``, ``.`` and ``-``, starting with a letter, at most 63 characters (a
PostgreSQL role name's limit). On ASCII, lower-casing is Unicode's case folding, so this is UAX #31's
NFKC_Casefold comparison restricted to a strict allowlist: NFKC maps the compatibility lookalikes to what they
look like (fullwidth ``ａ`` -> ``a``, the Kelvin sign -> ``K``), and the allowlist refuses everything NFKC keeps
distinct yet can look the same or show nothing: invisible format characters (zero-width space, U+200B), spaces
of any kind (NBSP, tab), control characters, combining marks (``e`` + U+0301), and letters of other scripts
(Cyrillic ``а``, Greek ``ο``), whose confusability (UTS #39) no short rule captures. Two names either have the
same identity or could not both be registered.

The same rule is the database's (``governance.identity_key``, sql/028), which canonicalises ``requested_by``,
refuses a decision by a login that is not an identity, and compares the two in the four-eyes trigger; this
module refuses earlier, in one sentence naming the offending character.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from trajpub.errors import ParameterError

IDENTITY = re.compile(r"[a-z][a-z0-9_.-]{0,62}")
ALLOWED = "ASCII letters, digits, '_', '.' and '-', starting with a letter, at most 63 characters"
_KINDS = {"Cf": "an invisible format character", "Zs": "a space", "Zl": "a line separator",
          "Zp": "a paragraph separator", "Cc": "a control character", "Mn": "a combining mark",
          "Me": "an enclosing mark", "Mc": "a combining mark"}


def _describe(char: str) -> str:
    """``U+200B ZERO WIDTH SPACE (an invisible format character)``: a character named so that it shows."""
    kind = _KINDS.get(unicodedata.category(char))
    if kind is None:
        kind = "not an ASCII letter or digit" if char.isascii() else "a letter of another script or a symbol"
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')} ({kind})"


def canonical_identity(value: Any, what: str = "requested_by") -> str:
    """The canonical form of the identity ``value`` (NFKC, lower case); a one-sentence ParameterError naming
    ``what`` and the first character that is not allowed (a list, a number or an empty name is refused too)."""
    if not isinstance(value, str):
        raise ParameterError(f"{what} must be one name (a login or a registered requester), not "
                             f"{type(value).__name__} {str(value)[:40]!r}", what)
    for position, char in enumerate(value, 1):
        folded = unicodedata.normalize("NFKC", char)
        if not folded or not all(c.isascii() and (c.isalnum() or c in "_.-") for c in folded):
            raise ParameterError(f"{what} {ascii(value)[:80]} has {_describe(char)} at position {position}; an "
                                 f"identity is {ALLOWED}", what)
    canonical = unicodedata.normalize("NFKC", value).lower()
    if not IDENTITY.fullmatch(canonical):
        raise ParameterError(f"{what} {ascii(value)[:80]} is not an identity: {ALLOWED}", what)
    return canonical
