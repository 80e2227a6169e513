"""The MPK window's call-graph walk (tests/callgraph/check_window.py) on
instruction listings made up here: each way out of the trusted text must be
a finding, however objdump spells it, and a path that stays inside must not.

The built binaries are walked by the meson tests window-callgraph*; these
cases cover spellings and instructions that this machine's objdump and
compiler do not produce, so that the walk does not depend on them."""

import importlib.util

import pytest

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location(
    "check_window", REPO / "tests" / "callgraph" / "check_window.py")
check_window = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_window)

# A trusted range [0x1000, 0x1100) holding the entry, and an untrusted
# function at 0x2000 (a PLT stub, say).
RANGES = [("window", 0x1000, 0x1100)]
OUTSIDE = "2000 <memset@plt>"


def listing(*insns):
    """{address: (text, label)}: the entry at 0x1000, one instruction every
    4 bytes, then a `ret` that ends every path."""
    out = {0x1000 + 4 * i: (text, "f") for i, text in enumerate(insns)}
    out[0x1000 + 4 * len(insns)] = ("ret", "f")
    return out


def findings(*insns):
    found, _ = check_window.walk(listing(*insns), RANGES, [0x1000])
    return found


@pytest.mark.parametrize("insn", [
    f"call   {OUTSIDE}",
    f"callq  {OUTSIDE}",        # objdump before binutils 2.37 or so: AT&T suffix
    f"bnd callq {OUTSIDE}",
    f"jmp    {OUTSIDE}",
    f"jmpq   {OUTSIDE}",
    f"je     {OUTSIDE}",
])
def test_direct_transfer_out_is_a_finding(insn):
    found = findings("nop", insn)
    assert any("out of the trusted text" in f and "memset@plt" in f for f in found), found


@pytest.mark.parametrize("insn", [
    "call   *%rax", "callq  *0x10(%rip)", "notrack jmp *%rax", "jmpq   *%rdx",
])
def test_indirect_transfer_is_a_finding(insn):
    assert any("indirect" in f for f in findings(insn)), findings(insn)


@pytest.mark.parametrize("insn", [
    "xbegin 2000 <elsewhere>",  # an RTM abort resumes at its operand
    "int    $0x80",
    "sysenter",
    "lcall  *(%rax)",
])
def test_unchecked_transfer_is_a_finding(insn):
    assert findings(insn), f"{insn!r} passed the walk"


def test_path_inside_is_clean():
    found = findings("nop", "callq  1010 <f+0x10>", "jmp    1010 <f+0x10>", "nop",
                     "xor    %eax,%eax", "syscall")
    assert found == []


@pytest.mark.parametrize("code, clean", [
    ({".text": 0x100}, True),
    # Link-time optimisation: the labels bound more (or less) than the unit.
    ({".text": 0x80}, False),
    ({".text": 0x200}, False),
    # Code the compiler put in another section lies outside the range.
    ({".text": 0x100, ".text.unlikely": 6}, False),
    ({".text": 0x100, ".text.hot": 16}, False),
])
def test_window_range_is_exactly_the_units_code(code, clean):
    found = check_window.unit_findings(0x1000, 0x1100, code, "window.o")
    assert (found == []) == clean, found


# The indirect-call kind's one allowed indirect call: `call *0x30(%reg)`
# (MPK_SLOT_FN) in the gate's text, followed to the slot's one function.
SLOT_FN = (0x1000, 0x1100, 0x1080)


def slot_listing(insn):
    insns = listing("nop", insn)
    insns[0x1080] = ("ret", "isob_window_kind_empty")
    return insns


def test_slot_pointer_call_in_the_gate_is_followed():
    found, stats = check_window.walk(slot_listing("call   *0x30(%rcx)"), RANGES, [0x1000],
                                     SLOT_FN)
    assert found == []
    assert "isob_window_kind_empty" in stats["functions"]


@pytest.mark.parametrize("insn", [
    "call   *0x28(%rcx)",          # another field of the slot
    "call   *0x30(%rcx,%rax,8)",   # indexed: not the slot's field
    "call   *%rcx",
    "jmp    *0x30(%rcx)",          # a jump: not the gate's call
    "call   *0x30(%rip)",          # ordinary memory the untrusted side may write
])
def test_other_indirect_calls_stay_findings(insn):
    found, _ = check_window.walk(slot_listing(insn), RANGES, [0x1000], SLOT_FN)
    assert any("indirect" in f for f in found), found


def test_slot_pointer_call_outside_the_gate_is_a_finding():
    found, _ = check_window.walk(slot_listing("call   *0x30(%rcx)"), RANGES, [0x1000],
                                 (0x3000, 0x3100, 0x1080))
    assert any("indirect" in f for f in found), found
