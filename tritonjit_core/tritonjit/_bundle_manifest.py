"""A bundle's manifest, checked whole before anything is written (no I/O here).

A bundle comes from another machine and is trusted no further than its hashes: its
manifest decides which files are written where and which index entries appear, so
every part of it is checked against the one layout tritonjit writes, and the first
thing that is wrong refuses the whole bundle with a :class:`BundleError` that names
the bundle file, the entry and the field, and says what was expected.

Layout (``FORMAT`` 1)::

    {"format": 1, "created": <time>, "triton": "<Triton fingerprint>",
     "files": {"artifacts/<dir>/<name>": "<sha256>", ...},
     "entries": [<index entry without its checksum>, ...]}

Every member is ``artifacts/<dir>/<name>`` with both parts plain names, and belongs
to an entry whose ``artifact`` is ``<dir>`` and whose ``files`` list ``<name>`` with
the same hash; entries follow the index's own rules (``_disk_cache.entry_problem``
with ``portable``): a key is a sha256 digest, the artifact a directory name inside
Triton's cache, stem and binary extension plain names of files the entry lists.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._disk_cache import entry_problem

FORMAT = 1
MANIFEST = "tritonjit-bundle.json"
_MEMBER_PART = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOP_FIELDS = ("format", "created", "triton", "entries", "files")
REFUSED = "refusing the whole bundle; nothing was installed"


class BundleError(ValueError):
    """A bundle that cannot be imported: tampered, truncated or malformed."""


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: its entries and the sha256 of every member it lists."""

    entries: list[dict[str, Any]]
    files: dict[str, str]
    triton: str


def refuse(path: str, what: str) -> BundleError:
    """The one format of a refusal: the bundle, what is wrong, and that nothing was written."""
    return BundleError(f"bundle '{path}': {what}; {REFUSED}")


def member_dir(member: str) -> str:
    """``<dir>`` of ``artifacts/<dir>/<name>``."""
    return member.split("/")[1]


def parse_manifest(path: str, raw: bytes) -> Manifest:
    """The manifest of the bundle at ``path``, every field checked; raises BundleError."""
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse(path, f"{MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise refuse(path, f"{MANIFEST} must be a JSON object, got a {type(manifest).__name__}")
    _check_top(path, manifest)
    files = manifest["files"]
    for member, digest in files.items():
        check_member_name(path, member)
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise refuse(path, f"{MANIFEST} field 'files' lists '{member}' with {_short(digest)}; expected a "
                               "sha256 digest (64 lowercase hex digits)")
    entries = manifest["entries"]
    keys: dict[str, int] = {}
    used: set[str] = set()
    for i, entry in enumerate(entries):
        _check_entry(path, i, entry, files, keys)
        used.update(f"artifacts/{entry['artifact']}/{name}" for name in entry["files"])
    unused = sorted(set(files) - used)
    if unused:
        raise refuse(path, f"{MANIFEST} field 'files' lists '{unused[0]}', which no entry uses")
    return Manifest(entries, files, manifest["triton"])


def _check_top(path: str, manifest: dict[str, Any]) -> None:
    expected = {"format": f"{FORMAT} (the bundle format this tritonjit reads)", "created": "a number",
                "triton": "a string", "entries": "a list of entries", "files": "an object of members to sha256 digests"}
    types: dict[str, type | tuple[type, ...]] = {"created": (int, float), "triton": str, "entries": list,
                                                 "files": dict}
    for field in _TOP_FIELDS:
        if field not in manifest:
            raise refuse(path, f"{MANIFEST} field '{field}' is missing; expected {expected[field]}")
        v = manifest[field]
        ok = v == FORMAT and type(v) is int if field == "format" else \
            isinstance(v, types[field]) and not isinstance(v, bool)
        if not ok:
            raise refuse(path, f"{MANIFEST} field '{field}' must be {expected[field]}, got {_short(v)}")
    unknown = sorted(set(manifest) - set(_TOP_FIELDS))
    if unknown:
        raise refuse(path, f"{MANIFEST} has an unknown field '{unknown[0]}' (it has {', '.join(_TOP_FIELDS)})")


def check_member_name(path: str, member: Any) -> None:
    """A member is ``artifacts/<dir>/<name>``, both plain names: it can only land in <dir>."""
    problem = member_name_problem(member)
    if problem is not None:
        raise refuse(path, problem)


def member_name_problem(member: Any) -> str | None:
    """Why ``member`` is not a member name a bundle may hold (None: it is one)."""
    parts = member.split("/") if isinstance(member, str) else []
    if len(parts) != 3 or parts[0] != "artifacts" or not all(
            _MEMBER_PART.fullmatch(p) and p not in (".", "..") for p in parts[1:]):
        return (f"unsafe or unexpected member name {_short(member)}; expected 'artifacts/<dir>/<file>' "
                "with plain names (letters, digits, '_', '-', '.')")
    return None


def _check_entry(path: str, i: int, entry: Any, files: dict[str, str], keys: dict[str, int]) -> None:
    """One entry: the index's rules for a portable entry, and its files held by the bundle."""
    where = _entry_label(i, entry)
    problem = entry_problem(entry, portable=True)
    if problem is not None:
        field, what = problem
        if not field:
            raise refuse(path, f"{where} {what}, got {_short(entry)}")
        raise refuse(path, f"{where}: field '{field}' {what}")
    if entry["key"] in keys:
        raise refuse(path, f"{where}: field 'key' {entry['key'][:16]}... is the key of entry {keys[entry['key']]} too")
    keys[entry["key"]] = i
    for name, digest in entry["files"].items():
        member = f"artifacts/{entry['artifact']}/{name}"
        if files.get(member) != digest:
            held = "with another hash" if member in files else "not at all"
            raise refuse(path, f"{where}: field 'files' lists '{name}', which the bundle holds {held} "
                               f"(as '{member}')")


def _entry_label(i: int, entry: Any) -> str:
    if isinstance(entry, dict) and isinstance(entry.get("kernel"), str):
        sig = entry.get("signature")
        return f"entry {i} (kernel '{entry['kernel'][:60]}'" + (f", signature '{sig[:80]}')" if isinstance(sig, str)
                                                               else ")")
    return f"entry {i}"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
