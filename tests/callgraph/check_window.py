#!/usr/bin/env python3
"""Walk the MPK window of a built isob and fail on any way out of it.

usage: check_window.py [--relro] [--unit OBJECT] [--expect-leak NAME]... BINARY

While the MPK gate holds a compartment's key open, only trusted
instructions may run.  The trusted text is exactly two address ranges of
BINARY, both bounded by symbols the sources define:

  gate    [isob_mpk_gate_text, isob_mpk_gate_text_end)   src/mechanisms/mpk/gate_x86.S
  window  [isob_window_text, isob_window_text_end)       src/trusted/window.c

Starting from the gate's entries (isob_mpk_op_inline, isob_mpk_gate,
isob_mpk_close), every instruction reachable by falling through, by a
direct jump, conditional jump or call is visited (objdump -d); the walk
fails on

  - a call or jump whose target lies outside the trusted text (a PLT stub,
    a C library function, any other code of the program),
  - an indirect call or jump (its target cannot be checked here), but
    one: the call of ERIM's indirect-call kind in the gate's text,
    `call *MPK_SLOT_FN(%reg)` (gate.h), which reads its target from the
    compartment's key-tagged slot page.  mpk.c writes that pointer once,
    with isob_window_kind_empty, before the key is closed, and only code
    inside the window can write it afterwards (tests/vm/mpk_kinds.c shows
    the untrusted side's store fault, and a gate that reads the pointer
    from ordinary memory lose): the walk follows it to that function,
    and an indirect call of any other form, or outside the gate, stays a
    finding,
  - any other control transfer but `ret` and `syscall` (int, sysenter, far
    calls and returns, xbegin, whose abort resumes at its operand),
  - a target that is not the start of an instruction, or code that runs
    off the end of a range.

The window text is also inspected as ERIM inspects a binary: a WRPKRU or
XRSTOR/XRSTORS encoding at any byte offset of it is a finding (the gate's
own WRPKRUs are tests/c/test_mpk_gate.c's business).

`ret` ends a path: the gate's own returns run after it closed the key, and
the trusted code's return to addresses on the trusted stack, which only
the key opens.  `syscall` is allowed: the kernel is trusted.

--unit OBJECT (the window copy's object, or the static library holding
it) also requires the window range to be exactly that object's `.text`,
byte for byte: the labels bound one translation unit's text only while the
linker keeps it whole.  Link-time optimisation does not: it repartitions
the program, and the labels then bound other units' code, which the walk
would trust (meson.build builds the window copy without LTO for this).

--relro also requires full RELRO (BIND_NOW and a GNU_RELRO segment), the
defence in depth for a GOT that nothing in the window uses.

--expect-leak NAME inverts the verdict, for a deliberately leaky build (the
window copy built as the trusted code once was): exit 0 only when the walk
found a call or jump out of the trusted text to a symbol named NAME (e.g.
memset@plt), for each NAME given, so that the test shows it can fail.

Exit 0 on success, 1 on a finding (or, with --expect-leak, on a missing one), 2 when
the binary cannot be examined.
"""
import argparse
import re
import struct
import subprocess
import sys

RANGES = (("gate", "isob_mpk_gate_text", "isob_mpk_gate_text_end"),
          ("window", "isob_window_text", "isob_window_text_end"))
ENTRIES = ("isob_mpk_op_inline", "isob_mpk_gate", "isob_mpk_close", "isob_mpk_kind_inline",
           "isob_mpk_kind_direct", "isob_mpk_kind_indirect")
# The indirect-call kind's call through the slot page: MPK_SLOT_FN of gate.h
# (0x30) from the register that holds the slot's address, and the one
# function mpk.c stores there.
SLOT_FN_RE = re.compile(r"^\*0x30\(%r(?:[a-d]x|[sd]i|bp|8|9|1[0-5])\)$")
SLOT_FN_TARGET = "isob_window_kind_empty"
# Prefixes objdump prints before a mnemonic.
PREFIXES = {"notrack", "bnd", "rep", "repz", "repe", "repnz", "repne", "lock", "data16",
            "addr32", "cs", "ds", "es", "ss", "fs", "gs"}
ENDS = {"ret", "ud2", "hlt", "int3"}
# Older objdumps print AT&T's operand-size suffix on branches (callq, jmpq,
# retq): the same instructions, which must not slip past as ordinary ones.
SUFFIXED = {"callq": "call", "calll": "call", "jmpq": "jmp", "jmpl": "jmp", "retq": "ret",
            "retl": "ret"}
CONDITIONAL = {"loop", "loope", "loopne", "loopz", "loopnz", "jrcxz", "jecxz", "jcxz"}
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
LABEL_RE = re.compile(r"^([0-9a-f]+) <(.+)>:$")
TARGET_RE = re.compile(r"^([0-9a-f]+)(?: <(.+)>)?$")


class Unusable(Exception):
    """The binary cannot be examined (exit 2)."""


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise Unusable(f"{cmd[0]}: {e.strerror}") from e
    if p.returncode != 0:
        raise Unusable(f"{' '.join(cmd)}: {p.stderr.strip() or 'exit %d' % p.returncode}")
    return p.stdout


def symbols(binary):
    """Every symbol's address by name (first definition wins)."""
    out = {}
    for line in run(["nm", "-a", binary]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] not in out:
            out[parts[2]] = int(parts[0], 16)
    return out


def disassemble(binary, lo, hi):
    """{address: (instruction text, enclosing label)} for [lo, hi)."""
    text = run(["objdump", "-d", "-w", "--no-show-raw-insn", f"--start-address={lo:#x}",
                f"--stop-address={hi:#x}", binary])
    insns, label = {}, "?"
    for line in text.splitlines():
        m = LABEL_RE.match(line)
        if m:
            label = m.group(2)
            continue
        m = INSN_RE.match(line)
        if m:
            insns[int(m.group(1), 16)] = (m.group(2).strip(), label)
    return insns


def split(insn):
    """(mnemonic, operands) with prefixes and objdump's comments dropped."""
    words = insn.split("#", 1)[0].split()
    while words and words[0] in PREFIXES:
        words.pop(0)
    if not words:
        return "", ""
    return SUFFIXED.get(words[0], words[0]), " ".join(words[1:])


def walk(insns, ranges, entries, slot_fn=None):
    """Visit everything reachable from entries; (findings, stats).  slot_fn,
    (gate_lo, gate_hi, target): the indirect-call kind's `call *0x30(%reg)`
    inside [gate_lo, gate_hi) is a call to target (SLOT_FN_RE)."""
    order = sorted(insns)
    after = {a: order[i + 1] if i + 1 < len(order) else None for i, a in enumerate(order)}

    def trusted(addr):
        return any(lo <= addr < hi for _, lo, hi in ranges)

    findings, seen, labels, syscalls = [], set(), set(), 0
    work = list(entries)
    while work:
        addr = work.pop()
        if addr in seen:
            continue
        seen.add(addr)
        insn, label = insns[addr]
        labels.add(label)
        mnem, ops = split(insn)
        where = f"{addr:#x} <{label}>: {insn}"

        def go(target_text, kind):
            if (slot_fn and kind == "call" and slot_fn[0] <= addr < slot_fn[1]
                    and SLOT_FN_RE.match(target_text)):
                target_text = f"{slot_fn[2]:x} <{SLOT_FN_TARGET}>"
            if target_text.startswith("*"):
                findings.append(f"{where}: an indirect {kind}, whose target cannot be checked")
                return
            m = TARGET_RE.match(target_text)
            if not m:
                findings.append(f"{where}: a {kind} to {target_text!r}, which this check cannot read")
                return
            target = int(m.group(1), 16)
            name = m.group(2) or "?"
            if not trusted(target):
                findings.append(f"{where}: a {kind} out of the trusted text, to {target:#x} <{name}>")
            elif target not in insns:
                findings.append(f"{where}: a {kind} into the middle of an instruction at {target:#x}")
            else:
                work.append(target)

        def fall():
            nxt = after[addr]
            if nxt is None or not trusted(nxt) or not any(
                    lo <= addr < hi and lo <= nxt < hi for _, lo, hi in ranges):
                findings.append(f"{where}: runs off the end of the trusted text")
            else:
                work.append(nxt)

        if mnem in ENDS:
            continue
        if mnem == "jmp":
            go(ops, "jump")
        elif mnem == "call":
            go(ops, "call")
            fall()
        elif (mnem.startswith("j") and mnem != "jmp") or mnem in CONDITIONAL:
            go(ops, "conditional jump")
            fall()
        elif mnem in ("syscall",):
            syscalls += 1
            fall()
        elif mnem in ("sysenter", "int", "into", "iret", "iretq", "lcall", "ljmp", "sysret",
                      "xbegin", "lret", "lretq"):
            findings.append(f"{where}: a control transfer this check does not allow")
        else:
            fall()
    return findings, {"instructions": len(seen), "functions": sorted(labels), "syscalls": syscalls}


def code_bytes(binary, lo, hi):
    """The file's bytes at virtual addresses [lo, hi), from its PT_LOAD segments."""
    with open(binary, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise Unusable(f"{binary} is not a 64-bit ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1 and p_vaddr <= lo and hi <= p_vaddr + p_filesz:
            return data[p_offset + lo - p_vaddr:p_offset + hi - p_vaddr]
    raise Unusable(f"{lo:#x}..{hi:#x} lies in no loaded segment of {binary}")


def stray_pkru_writes(binary, lo, hi):
    """ERIM's inspection of the window text: WRPKRU (0f 01 ef) or XRSTOR/XRSTORS
    (0f ae /5, 0f c7 /3, memory operand) at any byte offset, each a way to
    change PKRU from inside the trusted text that the gate does not check."""
    code, found = code_bytes(binary, lo, hi), []
    for i in range(len(code) - 2):
        a, b, c = code[i], code[i + 1], code[i + 2]
        if (a, b, c) == (0x0F, 0x01, 0xEF):
            found.append(f"{lo + i:#x}: WRPKRU bytes (0f 01 ef) in the window text")
        elif a == 0x0F and b in (0xAE, 0xC7) and c >> 6 != 3 and (c >> 3) & 7 == (5 if b == 0xAE else 3):
            found.append(f"{lo + i:#x}: {'XRSTOR' if b == 0xAE else 'XRSTORS'} bytes "
                         f"({a:02x} {b:02x} {c:02x}) in the window text")
    return found


SECTION_RE = re.compile(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)")


def unit_code(unit):
    """{section name: bytes} of every executable section with code in OBJECT,
    or in the one member of a static library."""
    out, members = {}, 0
    for line in run(["readelf", "-S", "-W", unit]).splitlines():
        members += line.startswith("File: ")
        m = SECTION_RE.search(line)
        if m and "X" in m.group(3) and int(m.group(2), 16):
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2), 16)
    if members > 1:
        raise Unusable(f"{unit} holds {members} objects, not the window copy's one")
    return out


def unit_findings(lo, hi, code, unit):
    """Findings when the window range is not exactly the unit's code."""
    found = []
    size = code.get(".text", 0)
    if hi - lo != size:
        found.append(f"the window range holds {hi - lo} bytes, but the window copy's object ({unit}) "
                     f"has {size} bytes of .text: the range holds other code (link-time "
                     f"optimisation?), or misses some of the copy's")
    for name, n in sorted(code.items()):
        if name != ".text":
            found.append(f"{unit} has {n} bytes of code in {name}, outside the window range")
    return found


def relro(binary):
    """Findings about full RELRO (BIND_NOW and GNU_RELRO)."""
    found = []
    dyn = run(["readelf", "-d", "-W", binary])
    if "There is no dynamic section" in dyn:
        return [f"{binary} has no dynamic section: --relro is for the dynamically linked isob"]
    if not re.search(r"\(FLAGS\)\s+.*BIND_NOW", dyn) and not re.search(r"\(FLAGS_1\)\s+Flags:.*\bNOW\b", dyn):
        found.append("readelf -d: no BIND_NOW (FLAGS) or NOW (FLAGS_1): symbols are bound lazily")
    if "GNU_RELRO" not in run(["readelf", "-l", "-W", binary]):
        found.append("readelf -l: no GNU_RELRO segment: the GOT stays writable")
    return found


def main():
    ap = argparse.ArgumentParser(description="Walk the MPK window of a built isob.")
    ap.add_argument("--relro", action="store_true", help="also require full RELRO")
    ap.add_argument("--unit", metavar="OBJECT",
                    help="the window copy's object or static library: the window range must be "
                         "exactly its .text")
    ap.add_argument("--expect-leak", action="append", default=[], metavar="NAME",
                    help="the binary is the deliberately leaky build: succeed only when the walk "
                         "leaves the trusted text for NAME (repeatable)")
    ap.add_argument("binary")
    a = ap.parse_args()
    try:
        syms = symbols(a.binary)
        ranges = []
        for name, lo_sym, hi_sym in RANGES:
            if lo_sym not in syms or hi_sym not in syms:
                raise Unusable(f"{a.binary} has no {lo_sym}/{hi_sym} symbols (stripped, or not an x86-64 isob)")
            lo, hi = syms[lo_sym], syms[hi_sym]
            if not lo < hi:
                raise Unusable(f"{name} text is empty: {lo_sym} {lo:#x}, {hi_sym} {hi:#x}")
            ranges.append((name, lo, hi))
        entries = []
        for e in ENTRIES:
            if e not in syms:
                raise Unusable(f"{a.binary} has no {e}")
            entries.append(syms[e])
        insns = {}
        for _, lo, hi in ranges:
            insns.update(disassemble(a.binary, lo, hi))
        for e, addr in zip(ENTRIES, entries):
            if addr not in insns:
                raise Unusable(f"{e} at {addr:#x} lies outside the trusted text")
        if SLOT_FN_TARGET not in syms:
            raise Unusable(f"{a.binary} has no {SLOT_FN_TARGET}")
        gate = next(r for r in ranges if r[0] == "gate")
        findings, stats = walk(insns, ranges, entries, (gate[1], gate[2], syms[SLOT_FN_TARGET]))
        for name, lo, hi in ranges:
            if name == "window":
                findings += stray_pkru_writes(a.binary, lo, hi)
                if a.unit:
                    findings += unit_findings(lo, hi, unit_code(a.unit), a.unit)
        if a.relro:
            findings += relro(a.binary)
    except Unusable as e:
        print(f"check_window: {e}", file=sys.stderr)
        return 2
    for name, lo, hi in ranges:
        print(f"# trusted text {name}: [{lo:#x}, {hi:#x}), {hi - lo} bytes")
    print(f"# reached from {', '.join(ENTRIES)}: {stats['instructions']} instructions in "
          f"{len(stats['functions'])} functions, {stats['syscalls']} syscall instructions")
    print(f"# functions: {' '.join(stats['functions'])}")
    for f in findings:
        print(f"LEAK: {f}")
    if a.expect_leak:
        missing = [n for n in a.expect_leak
                   if not any(f"out of the trusted text, to " in f and f.endswith(f" <{n}>")
                              for f in findings)]
        if not missing:
            print(f"ok: {len(findings)} ways out of the window found in this deliberately leaky build, "
                  f"as there must be (to {', '.join(a.expect_leak)} among them)")
            return 0
        print(f"FAIL: the deliberately leaky build shows no way out of the window to "
              f"{', '.join(missing)}: the check cannot fail as it must")
        return 1
    if findings:
        print(f"FAIL: {len(findings)} ways out of the MPK window")
        return 1
    print("ok: nothing reachable from the gate leaves the trusted text"
          + (", and the binary has full RELRO" if a.relro else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
