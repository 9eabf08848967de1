"""The limits ``grade`` puts on a sandbox that the kernel counts (its cgroup, its seccomp filter), what
bubblewrap itself is started with, and the grader's own guards that need no kernel: the CSV's target,
a file that links to itself, names that read alike, how many sandboxes run at once and what the
terminal shows. Fast: the kernels of the sandbox run in ``test_grade_hostile.py`` and
``test_grade_kernel_limits.py``."""
from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from batchlab.apps import cgroups, grade, sandbox, seccomp
from batchlab.apps.cli import main
from batchlab.apps.grade import class_jobs, grade_class, grade_notebook, submissions
from batchlab.apps.grade_report import MAX_SHOWN, check_csv_target, printable, write_csv

# ── the seccomp program, run by a small classic-BPF interpreter and by the kernel ───────────────────


def _run_bpf(program: bytes, arch: int, nr: int) -> int:
    """What ``program`` returns for a call ``nr`` from ``arch`` (the instructions the filter uses)."""
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data, acc, pc = {0: nr, 4: arch}, 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


ALLOW, KILL, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_filter_refuses_keyrings_always_and_unowned_memory_only_without_a_cgroup(arch):
    audit = seccomp.ARCHES[arch]
    number = lambda name: seccomp.syscall_number(name, arch)  # noqa: E731
    for refuse_memory in (False, True):
        program = seccomp.filter_program(refuse_memory)
        for name in seccomp.KEYRING_CALLS:
            assert _run_bpf(program, audit, number(name)) == ERRNO | 1  # EPERM
        assert _run_bpf(program, audit, number("fallocate")) == ERRNO | 95  # EOPNOTSUPP: posix_fallocate writes
        for name in seccomp.MEMORY_CALLS:
            assert _run_bpf(program, audit, number(name)) == (KILL if refuse_memory else ALLOW), name
    # an ordinary call is allowed on both; another architecture's entry (i386 here) kills
    assert _run_bpf(seccomp.filter_program(True), audit, 0) == ALLOW
    assert _run_bpf(seccomp.filter_program(True), 0x40000003, 0) == KILL


@given(st.integers(min_value=0, max_value=600))
def test_every_other_call_number_is_allowed(nr):
    refused = {seccomp.syscall_number(n, "x86_64") for n in (*seccomp.KEYRING_CALLS, *seccomp.MEMORY_CALLS,
                                                             "fallocate")}
    verdict = _run_bpf(seccomp.filter_program(True), seccomp.ARCHES["x86_64"], nr)
    assert (verdict == ALLOW) == (nr not in refused)


def test_bubblewrap_applies_the_filter():
    """Run for real: without a cgroup memfd_create kills its caller (159 = 128 + SIGSYS), with one it
    works; the keyring is refused both ways."""
    code = ("import ctypes, os\nl = ctypes.CDLL(None, use_errno=True)\n"
            f"assert l.syscall({seccomp.syscall_number('keyctl')}, 0, -3, 0) == -1 and ctypes.get_errno() == 1\n"
            "os.memfd_create('x')\nprint('memfd')")
    runs = {}
    for refuse_memory in (True, False):
        read, write = os.pipe()
        os.write(write, seccomp.filter_program(refuse_memory))
        os.close(write)
        runs[refuse_memory] = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--seccomp",
             str(read), sys.executable, "-I", "-S", "-c", code], pass_fds=(read,), capture_output=True, text=True)
        os.close(read)
    assert runs[True].returncode == seccomp.KILLED_EXIT and "memfd" not in runs[True].stdout
    assert runs[False].returncode == 0 and runs[False].stdout == "memfd\n", runs[False].stderr


# ── the cgroup ───────────────────────────────────────────────────────────────────────────────────

def test_the_first_line_says_which_limit_counts_memory():
    assert "cgroup v1" in cgroups.Counting("v1").line() and "cgroup v2" in cgroups.Counting("v2").line()
    none = cgroups.Counting("", why_not="x").line()
    assert "没有可用的 cgroup" in none and "seccomp" in none and "常驻内存" in none


@pytest.mark.skipif(not cgroups.counting().kind or cgroups.counting().kind == "systemd",
                    reason="no cgroup this account can make here (the unprivileged mode has the seccomp filter)")
def test_a_cgroup_counts_memory_no_process_owns():
    """memfd pages written with write() (never mapped: no process's resident memory) count against the
    box's limit: 96 MiB under a 64 MiB limit reaches it, 16 MiB does not."""
    code = ("import os, sys, time\nfd = os.memfd_create('x')\n"
            "try:\n    for _ in range(int(sys.argv[1])):\n        os.write(fd, b'x' * 2**20)\n"
            "except OSError:\n    pass\ntime.sleep(0.3)")
    verdicts = {}
    for mib in (16, 96):
        box = cgroups.Box(cgroups.counting(), 64 * 2**20, 32)
        try:
            subprocess.run([sys.executable, "-I", "-S", "-c", sandbox._LAUNCHER, str(seccomp.syscall_number("keyctl")),
                            "/dev/null", str(len(box.procs())), *box.procs(), sys.executable, "-c", code, str(mib)],
                           check=False, timeout=60)
            verdicts[mib] = box.over()
        finally:
            box.remove()
        assert not any(folder.exists() for folder in box.folders)
    assert verdicts == {16: False, 96: True}


# ── what bubblewrap starts with, and what it hides ───────────────────────────────────────────────

def test_bubblewrap_starts_with_the_allow_list_only(monkeypatch, tmp_path):
    monkeypatch.setenv("BATCHLAB_TEACHER_TOKEN", "s3cret-token")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = sandbox.launch_env()
    assert set(env) <= {"PATH", "LANG", *sandbox.PASSED_ENV} and env["OMP_NUM_THREADS"] == "2"
    # idle OpenMP threads sleep (kernels side by side do not spin against each other), unless the instructor says
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert sandbox.launch_env()["OMP_WAIT_POLICY"] == "ACTIVE"
    sandbox.prepare_run(tmp_path, b"{}")
    argv = sandbox.sandbox_argv(tmp_path, ["true"], hidden=[Path("/usr/share/batchlab-class")])
    assert "s3cret-token" not in " ".join(argv) and "BATCHLAB_TEACHER_TOKEN" not in " ".join(argv)
    # a submissions folder under /usr (bound read-only) is covered by an empty folder; one elsewhere is not bound
    assert argv[argv.index("/usr/share/batchlab-class") - 1] == "--tmpfs"
    assert "--seccomp" in argv and (tmp_path / "seccomp.bpf").read_bytes() == seccomp.filter_program(True)


# ── the CSV, a link to itself, names that read alike ─────────────────────────────────────────────

def test_a_csv_path_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "li.docx").write_text("x", encoding="utf-8")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep", encoding="utf-8")
    (tmp_path / "grades.csv").symlink_to(victim)
    assert main(["grade", str(tmp_path / "subs"), "--csv", str(tmp_path / "grades.csv")]) == 2
    assert victim.read_text(encoding="utf-8") == "keep"
    with pytest.raises(ValueError, match="符号链接"):
        check_csv_target(tmp_path / "grades.csv", tmp_path / "subs")
    # a link planted after the check is replaced by the table, never followed
    target = check_csv_target(tmp_path / "fresh.csv", tmp_path / "subs")
    (tmp_path / "fresh.csv").symlink_to(victim)
    write_csv(target, ["学生"], [["li"]])
    assert victim.read_text(encoding="utf-8") == "keep" and not (tmp_path / "fresh.csv").is_symlink()
    assert (tmp_path / "fresh.csv").read_text(encoding="utf-8-sig") == "学生\nli\n"


def test_a_file_that_links_to_itself_gets_its_own_row(tmp_path, capsys):
    (tmp_path / "loop.ipynb").symlink_to("loop.ipynb")
    (tmp_path / "li.docx").write_text("x", encoding="utf-8")
    assert [p.name for p in submissions(tmp_path, exclude=[tmp_path / "x.csv"])] == ["li.docx", "loop.ipynb"]
    assert grade_notebook(tmp_path / "loop.ipynb").status == "未批改：这是一个符号链接，只批改文件夹里的普通文件"
    assert main(["grade", str(tmp_path), "--json"]) == 0
    assert "loop" in capsys.readouterr().out


CONFUSABLE = ["zhangsan\u2060", "zhangsan\u2064", "zhangsan\u3164", "zhangsan\U000e0020", "zhang\u00adsan",
              "zhangsan\ufe0f", "zhang\u00a0san", "zhangsan\u115f"]


def test_names_that_read_alike_print_differently():
    shown = [printable(name) for name in ["zhangsan", "zhang san", *CONFUSABLE, "li\nsi", "li\\nsi"]]
    assert len(set(shown)) == len(shown), shown
    assert printable("li\\nsi") == "li\\\\nsi" and printable("li\nsi") == "li\\nsi"
    assert printable("张三 ok") == "张三 ok" and printable("zhangsan") == "zhangsan"


@given(st.text(max_size=300))
def test_a_shown_string_is_capped_and_two_strings_never_print_the_same(text):
    shown = printable(text)
    assert len(shown) <= 10 * MAX_SHOWN + 40  # \U000e0020 is ten characters; the note on the length
    assert printable(text + "\u2060") != shown and printable(text + "\\") != shown


def test_a_four_mib_exception_name_is_a_short_cell():
    from batchlab.apps.grade_kernel import _status

    status = _status([(3, "E" * 4 * 2**20)], 600)
    assert len(status) < 400 and "共 4,194,304 个字符" in status


# ── how many at once, and what the terminal shows ────────────────────────────────────────────────

def test_jobs_follow_the_cores_and_the_memory(monkeypatch):
    import psutil

    assert class_jobs(3, 10) == (3, "--jobs") and class_jobs(8, 2)[0] == 2
    for bad in (0, -1, grade.MAX_JOBS + 1):
        with pytest.raises(ValueError, match="--jobs"):
            class_jobs(bad, 10)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": 9 * 2**30})())
    assert class_jobs(None, 100)[0] == 2  # 9 GiB hold two 4 GiB limits, not 16
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": 2**30})())
    assert class_jobs(None, 100)[0] == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_is_for_a_terminal_only(tmp_path):
    for name in ("li", "wang"):  # no notebook: no kernel starts
        (tmp_path / f"{name}.docx").write_text("x", encoding="utf-8")
    shown = {}
    for stream in (io.StringIO(), _Terminal()):
        grades = grade_class(tmp_path, stream=stream)
        assert [g.student for g in grades] == ["li", "wang"]
        shown[stream.isatty()] = stream.getvalue()
    assert shown[False].count("\n") == 1 and shown[False].startswith("批改 2 份，同时运行 ")
    assert "2/2" in shown[True] and "2/2" not in shown[False]


def test_an_empty_folder_prints_nothing_before_its_error(tmp_path, capsys):
    assert main(["grade", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "文件夹里没有要批改的文件" in err


def test_the_command_line_takes_jobs_and_refuses_a_bad_count_first(tmp_path, capsys):
    for name in ("li", "wang"):  # no notebook: no kernel starts
        (tmp_path / f"{name}.docx").write_text("x", encoding="utf-8")
    assert main(["grade", str(tmp_path), "--jobs", "1"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("批改 2 份，同时运行 1 个沙箱（--jobs）") and "li" in out and "wang" in out
    for bad in ("0", str(grade.MAX_JOBS + 1)):
        assert main(["grade", str(tmp_path), "--jobs", bad]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "jobs" in err and "批改" not in err
