/* The layout that the MPK call gate (gate_x86.S) and its C side (mpk.c)
 * share.  Included from assembly too, so only preprocessor constants live
 * outside the C-only part.
 *
 * The gate state of the compartment whose protection key is k lives in the
 * k-th page of isob_mpk_slots, a page-aligned array in the program's own
 * data that the gate addresses relative to its own instructions.  A slot
 * page is PROT_NONE while no compartment holds key k and tagged with key k
 * while one does, so the gate can read it only inside its own window. */
#ifndef ISOBENCH_MPK_GATE_H
#define ISOBENCH_MPK_GATE_H

/* PKRU while no call runs: every key but 0 access-disabled, Linux's own
 * initial value (init_pkru_value).  The gate closes with this immediate and
 * compares with it, so no register or memory can choose what it restores. */
#define MPK_PKRU_CLOSED 0x55555554

/* One slot per protection key (x86 has 16; key 0 is the default key and its
 * slot stays PROT_NONE); one 4 KiB page each, the x86-64 base page that
 * pkey_mprotect works on. */
#define MPK_SLOTS 16
#define MPK_SLOT_SHIFT 12
#define MPK_SLOT_SIZE (1 << MPK_SLOT_SHIFT)

/* Offsets in a slot (struct mpk_slot in mpk.c checks them). */
#define MPK_SLOT_PKRU_OPEN 0  /* uint32: PKRU inside this slot's window */
#define MPK_SLOT_BUSY 4       /* uint32: 1 while a call runs on this slot's stack */
#define MPK_SLOT_TABLE 8      /* struct isob_trusted *: the trusted state */
#define MPK_SLOT_MSG 16       /* struct isob_msg *: the shared buffer */
#define MPK_SLOT_CAP 24       /* uint64: bytes of msg->data */
#define MPK_SLOT_STACK 32     /* the trusted stack's top, 16-byte aligned */
#define MPK_SLOT_CALLS 40     /* uint64: calls of ERIM's call kinds (the gate's KIND bodies) */
#define MPK_SLOT_FN 48        /* long (*)(uint64_t *): what the indirect-call kind calls */

/* Offset of the slot index in the compartment descriptor (struct mpk_comp):
 * right after struct isob_comp, which holds two 8-byte members and the
 * ISOB_COMP_WHY_LEN (128) bytes of its `why`.  mpk.c asserts it. */
#define MPK_COMP_SLOT (16 + 128)

/* The result of a call that found the compartment busy with another
 * thread's call (-EBUSY). */
#define MPK_EBUSY 16

/* Which gate an instruction belongs to, and what it is, in the table of
 * gate instructions (struct isob_mpk_site in mpk.h). */
#define MPK_GATE_INLINE 0
#define MPK_GATE_BRIDGE 1
#define MPK_GATE_CLOSE 2   /* isob_mpk_close: the closing sequence alone */
#define MPK_GATE_KIND_INLINE 3    /* isob_mpk_kind_inline: ERIM's call kinds */
#define MPK_GATE_KIND_DIRECT 4    /* isob_mpk_kind_direct */
#define MPK_GATE_KIND_INDIRECT 5  /* isob_mpk_kind_indirect */
#define MPK_GATE_COUNT 6
#define MPK_ROLE_INSN 0
#define MPK_ROLE_OPEN 1    /* the opening WRPKRU */
#define MPK_ROLE_CLOSE 2   /* a closing WRPKRU */

#endif
