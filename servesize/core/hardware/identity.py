"""Does a measured device belong to a profile? Decided from names, never guessed."""

from __future__ import annotations

import re

# Form-factor words that tell variants of one chip apart (H100 SXM vs PCIe vs NVL).
_VARIANT_WORDS = frozenset({"sxm", "pcie", "nvl"})
_NOISE_WORDS = frozenset({"nvidia", "amd", "instinct", "geforce", "tesla", "per", "gpu"})


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]


def identity_tokens(profile_name: str) -> tuple[str, ...]:
    """The words a device name must contain to match ``profile_name``: the chip and its
    variant (``"H100 SXM"`` → ``("h100", "sxm")``); sizes such as ``80gb`` are left out."""
    bare = re.sub(r"\(.*?\)", "", profile_name)
    return tuple(w for w in _words(bare) if w not in _NOISE_WORDS and not re.fullmatch(r"\d+gb", w))


def device_matches(device_name: str, tokens: tuple[str, ...]) -> bool:
    """True when ``device_name`` (as NVML reports it) is the chip ``tokens`` describe.

    The chip token must appear as a word (so "L4" does not match "L40S"); a variant word in
    the device name must be one the profile names. NVML omits "SXM" on SXM parts
    ("NVIDIA H100 80GB HBM3"), so a profile's own variant word is not required.

    >>> device_matches("NVIDIA H100 80GB HBM3", ("h100", "sxm"))
    True
    >>> device_matches("NVIDIA H100 PCIe", ("h100", "sxm"))
    False
    >>> device_matches("NVIDIA L40S", ("l4",))
    False
    """
    if not tokens:
        return True
    words = set(_words(device_name))
    # NVML spells A100 SXM as "A100-SXM4-80GB": strip generation digits from variant words.
    words |= {re.sub(r"\d+$", "", w) for w in words if re.sub(r"\d+$", "", w) in _VARIANT_WORDS}
    chip = [t for t in tokens if t not in _VARIANT_WORDS]
    if not all(t in words for t in chip):
        return False
    device_variants = words & _VARIANT_WORDS
    return device_variants <= set(tokens)
