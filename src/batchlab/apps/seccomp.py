"""The system calls a student's kernel may not make, as the classic-BPF program bubblewrap loads with
``--seccomp FD`` (written here by hand with :mod:`struct`: no library to pin).

Two policies (:func:`filter_program`):

* always: the **keyrings** (``add_key``, ``request_key``, ``keyctl``) are refused, so a kernel can
  neither read the instructor's session keyring nor leave a key for the next student's kernel; and
  ``fallocate`` answers "not supported", so a file grows only by writing, which the file-size limit
  and the in-memory folders' sizes bound (glibc's ``posix_fallocate`` then writes instead);
* where no cgroup counts the sandbox's memory (:mod:`batchlab.apps.cgroups`): also **memory no process
  owns**: ``memfd_create``/``memfd_secret`` and System V shared memory (``shmget``, ``shmat``,
  ``shmctl``). The process that calls one is killed by the kernel (SIGSYS), which no ``try`` can
  catch: its sandbox exits with :data:`KILLED_EXIT`, and the grader's row says the limit was reached
  (nothing a kernel, torch or matplotlib does on its own calls them).

The numbers are those of x86_64 and aarch64 (Ascend hosts are often aarch64); a call made through any
other architecture's entry (32-bit ``int 0x80``, x32) ends the process, since its numbers differ.
"""
from __future__ import annotations

import errno
import platform
import signal
import struct

__all__ = ["ARCHES", "KEYRING_CALLS", "MEMORY_CALLS", "KILLED_EXIT", "filter_program", "native_arch",
           "syscall_number"]

# linux/audit.h: AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64
ARCHES: dict[str, int] = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NUMBERS: dict[str, dict[str, int]] = {  # asm/unistd_64.h and asm-generic/unistd.h
    "x86_64": {"shmget": 29, "shmat": 30, "shmctl": 31, "add_key": 248, "request_key": 249, "keyctl": 250,
               "fallocate": 285, "memfd_create": 319, "memfd_secret": 447},
    "aarch64": {"shmget": 194, "shmctl": 195, "shmat": 196, "add_key": 217, "request_key": 218, "keyctl": 219,
                "fallocate": 47, "memfd_create": 279, "memfd_secret": 447},
}
KEYRING_CALLS = ("add_key", "request_key", "keyctl")
MEMORY_CALLS = ("memfd_create", "memfd_secret", "shmget", "shmat", "shmctl")
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same calls under other numbers

# linux/filter.h and linux/seccomp.h
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
KILLED_EXIT = 128 + signal.SIGSYS
"""The exit status bubblewrap passes on when its process was killed for a refused call."""


def native_arch() -> str:
    """This machine's architecture as :data:`ARCHES` names it (``arm64`` is ``aarch64``)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def syscall_number(name: str, arch: str | None = None) -> int:
    """The number of the system call ``name`` on ``arch`` (default: this machine's); KeyError if unknown."""
    return _NUMBERS[arch or native_arch()][name]


def _refusals(memory: bool) -> dict[str, int]:
    """What the filter returns for each refused call, by name: an errno, or the process killed."""
    refused = {name: _ERRNO | errno.EPERM for name in KEYRING_CALLS}
    refused["fallocate"] = _ERRNO | errno.EOPNOTSUPP
    if memory:
        refused.update({name: _KILL_PROCESS for name in MEMORY_CALLS})
    return refused


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(refuse_memory: bool) -> bytes:
    """The seccomp program: keyrings always refused and ``fallocate`` unsupported; with
    ``refuse_memory`` memfd and System V shared memory kill their caller (see the module's docstring). Every other
    call of x86_64 or aarch64 is allowed; another architecture's entry kills the process."""
    refused = _refusals(refuse_memory)
    program: list[bytes] = []
    for arch, audit in ARCHES.items():
        block = [_insn(_LD_W_ABS, 0, 0, _NR_OFFSET)]
        if arch == "x86_64":  # x32 calls: refused as a whole ("not supported")
            block += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, _ERRNO | errno.ENOSYS)]
        for name, action in sorted(refused.items()):
            block += [_insn(_JEQ_K, 0, 1, _NUMBERS[arch][name]), _insn(_RET_K, 0, 0, action)]
        block.append(_insn(_RET_K, 0, 0, _ALLOW))
        # the arch is loaded once before each block; a block that does not match is jumped over
        program += [_insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET), _insn(_JEQ_K, 0, len(block), audit), *block]
    program.append(_insn(_RET_K, 0, 0, _KILL_PROCESS))
    return b"".join(program)
