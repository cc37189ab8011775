"""HyperNode `regexMatch` patterns: RE2 syntax, matched against node names in linear time.

Volcano compiles a HyperNode member's `regexMatch.pattern` with Go's `regexp` package, whose
syntax is RE2's (no backreferences, no lookaround), and takes a node when `MatchString(node.Name)`
is true: an unanchored search, so `gpu-1` also matches `gpu-10`; `^...$` anchors a whole name.
Here the same patterns go to RE2 itself (the google-re2 binding), so a pattern means the same
thing in both schedulers, and matching costs time linear in the name's length whatever the pattern:
`^(a+)+$` against forty `a`s and `-b` takes microseconds, where a backtracking engine (Python's
`re`) never finishes.

What is rejected, with RE2's own message: anything RE2 cannot parse (Go rejects the same
patterns: RE2 and Go share the syntax and the repetition limit of 1000); `\\C` (any single byte),
the one escape RE2 accepts and Go does not; and the empty pattern, which Volcano's admission
webhook refuses ("member regexMatch pattern is required") because it would take every node.

Pure: no I/O, no clock. The compiled regexps are immutable once built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import re2  # google-re2: RE2 itself; Volcano matches with Go's regexp, which is RE2

# A pattern's program and DFA cache are bounded by this (RE2's own default is 8 MiB); a pattern
# needing more is rejected at compile time (Go's regexp has a comparable size limit).
PATTERN_MAX_MEM: Final = 8 << 20


class _Regexp(Protocol):
    """The part of a compiled google-re2 regexp used here (the binding ships no type hints)."""

    def search(self, text: bytes) -> object: ...


class PatternError(ValueError):
    """A pattern RE2 (or Go's regexp) would not accept; `message` says why."""

    def __init__(self, pattern: str, message: str) -> None:
        super().__init__(f"{pattern!r}: {message}")
        self.pattern = pattern
        self.message = message


def re2_options(max_mem: int = PATTERN_MAX_MEM) -> object:
    """RE2 options as Go's regexp behaves: UTF-8, case-sensitive, Perl classes; no logging to stderr."""
    options = re2.Options()
    options.log_errors = False  # errors come back as exceptions and become Problems; RE2 must not print
    options.max_mem = max_mem
    return options


def _go_rejects(pattern: str) -> str | None:
    """What Go's regexp refuses although RE2 accepts it (`\\C`), outside `\\Q...\\E` literals."""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char != "\\":
            index += 1
            continue
        following = pattern[index + 1:index + 2]
        if following == "C":
            return "invalid escape sequence: \\C (any byte; Go's regexp, which Volcano uses, does not accept it)"
        if following == "Q":
            end = pattern.find("\\E", index + 2)
            if end < 0:
                return None  # the rest of the pattern is literal
            index = end + 2
            continue
        index += 2
    return None


class NamePattern:
    """One compiled `regexMatch` pattern. Build with `compile_pattern`."""

    __slots__ = ("_regexp", "pattern")

    def __init__(self, pattern: str, regexp: _Regexp) -> None:
        self.pattern = pattern
        self._regexp = regexp

    def search(self, name: str) -> bool:
        """Go's `MatchString`: does the pattern match anywhere in the name?"""
        return self._regexp.search(_utf8(name)) is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamePattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"NamePattern({self.pattern!r})"


def compile_pattern(pattern: str) -> NamePattern:
    """Compile a `regexMatch.pattern` as Volcano would; raises PatternError with RE2's reason."""
    if not pattern:
        raise PatternError(pattern, "is empty (Volcano requires a pattern; an empty one would take every node)")
    refused = _go_rejects(pattern)
    if refused is not None:
        raise PatternError(pattern, refused)
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PatternError(pattern, f"is not valid UTF-8 ({error.reason})") from None
    try:
        regexp: _Regexp = re2.compile(encoded, re2_options())
    except re2.error as error:
        raise PatternError(pattern, _reason(error)) from None
    return NamePattern(pattern, regexp)


def _reason(error: Exception) -> str:
    detail = error.args[0] if error.args else ""
    if isinstance(detail, bytes):
        return detail.decode("utf-8", "replace")
    return str(detail) or "rejected by RE2"


def _utf8(name: str) -> bytes:
    # Node names are DNS subdomains, but the fold must survive any string: a lone surrogate becomes
    # bytes RE2 reads as invalid UTF-8 (matched by nothing but byte-exact escapes) instead of an error.
    return name.encode("utf-8", "surrogatepass")


class _Set(Protocol):
    """The part of a compiled google-re2 Set used here."""

    def Add(self, pattern: bytes) -> int: ...

    def Compile(self) -> None: ...

    def Match(self, text: bytes) -> list[int] | None: ...


# A Set of a thousand patterns needs a larger budget than one pattern; past it, `Compile` fails and
# the patterns are split into smaller sets.
SET_MAX_MEM: Final = 64 << 20


class NamePatternSet:
    """Many patterns matched at once: which of them match a name, in one scan of the name.

    All patterns go into RE2 Sets (one DFA over their union), so matching a name against a thousand
    HyperNodes' patterns costs about what one pattern costs, instead of a thousand Python calls.
    RE2::Set answers "no match" when its DFA runs out of memory rather than saying so; an empty
    pattern (which matches every name) is added to each set as a witness, and a name whose answer
    lacks it is matched pattern by pattern instead (RE2's single-pattern search falls back to its
    NFA: slower, still linear). A set too large to compile is split in halves until it compiles.
    """

    __slots__ = ("_parts", "_patterns", "fallbacks")

    def __init__(self, patterns: Sequence[NamePattern], max_mem: int = SET_MAX_MEM) -> None:
        self._patterns = list(patterns)
        self._parts: list[tuple[int, int, _Set | None]] = []  # (first pattern, how many, their set or None)
        self.fallbacks = 0  # names matched pattern by pattern because a DFA gave up (tests read it)
        self._build(0, len(self._patterns), max_mem)

    def _build(self, start: int, stop: int, max_mem: int) -> None:
        if start >= stop:
            return
        compiled: _Set = re2.Set.SearchSet(re2_options(max_mem))
        try:
            for pattern in self._patterns[start:stop]:
                compiled.Add(pattern.pattern.encode("utf-8"))
            compiled.Add(b"")  # the witness, index stop - start: matches every name
            compiled.Compile()
        except re2.error:
            if stop - start == 1:
                self._parts.append((start, 1, None))  # too big for a set: matched on its own
                return
            middle = (start + stop) // 2
            self._build(start, middle, max_mem)
            self._build(middle, stop, max_mem)
            return
        self._parts.append((start, stop - start, compiled))

    def __len__(self) -> int:
        return len(self._patterns)

    def matching(self, name: str) -> list[int]:
        """Indexes (into the patterns given) of every pattern found in the name, ascending."""
        text = _utf8(name)
        found: list[int] = []
        for start, size, compiled in self._parts:
            answer = compiled.Match(text) if compiled is not None else None
            if answer is None or size not in answer:  # on its own, or the DFA gave up: one by one
                if compiled is not None:
                    self.fallbacks += 1
                found += [start + i for i in range(size) if self._patterns[start + i].search(name)]
                continue
            found += sorted(start + i for i in answer if i != size)
        return found
