"""The `ptc` command line, through click's CliRunner (and once through the installed script).

Exit status: 0 ok, 1 an error in the user's program or data, 2 usage, 3 internal error
(always a failure here, except in the one test that provokes it on purpose), 130 Ctrl-C.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from ptc import __version__, driver
from ptc.cli import Assignments, check_source, cli
from ptc.diagnostics import CompileError, Diagnostic, Span, format_plain
from ptc.grammar import parse
from ptc.grammar.printer import print_module
from ptc.report import render, render_error, use_color

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(ROOT.glob("samples/*.pt"))
GEMM = ROOT / "samples" / "gemm.pt"
GEMM_SHAPE = ["--shape", "M=200,N=136,K=72", "--tile", "BM=64,BN=64,BK=32"]

# Plain output, and unexpected exceptions raised (not turned into exit 3) so they fail loudly.
ENV = {"PTC_DEBUG": "1", "NO_COLOR": None, "FORCE_COLOR": None, "COLUMNS": "120"}


def ptc(*args, expect: int = 0, env: dict | None = None):
    result = CliRunner().invoke(cli, [str(a) for a in args], env={**ENV, **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "internal error" not in result.output, result.output
    assert result.exit_code == expect, f"exit {result.exit_code}:\n{result.output}"
    return result


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def expected_diagnostics(path: Path, shapes=None) -> str:
    """What `ptc check` must print for a file with errors: format_plain, one by one."""
    text = path.read_text()
    with pytest.raises(CompileError) as info:
        check_source(text, str(path), shapes or {})
    return "\n".join(format_plain(d, str(path) if d.span.line else "ptc", text) + "\n"
                     for d in info.value.diagnostics)


SCALE = """\
kernel scale(X: bf16[M, N]) -> (Y: f32[M, N]) {
  tile BM = 4, BN = 8
  parallel i: BM of M, j: BN of N {
    store(Y[i, j], (load(X[i, j]) as f32) * 2.0)
  }
}
"""

TWO_KERNELS = SCALE + """
kernel twice(X: f32[M]) -> (Y: f32[M]) {
  tile BM = 16
  parallel i: BM of M {
    store(Y[i], load(X[i]) + load(X[i]))
  }
}
"""

BAD = """\
kernel bad(A: f16[M, K]) -> (C: f16[M, K]) {
  tile BM = 64, BK = 32
  parallel i: BM of M, k: BK of K {
    x = load(A[i, k]) + y
    store(C[i, k], x)
  }
}
"""


# ---- top level -----------------------------------------------------------------------
def test_version():
    assert ptc("--version").output.strip() == f"ptc {__version__}"


@pytest.mark.parametrize("command", [[], ["check"], ["run"], ["compile"]])
def test_help_shows_an_example(command):
    out = ptc(*command, "--help").output
    assert "Examples:" in out
    assert re.search(r"^\s+ptc (check|run|compile) samples/\S+\.pt", out, re.M), out


def test_unknown_command_is_a_usage_error():
    assert "No such command" in ptc("frobnicate", expect=2).output


# ---- check ---------------------------------------------------------------------------
def test_samples_exist():
    assert SAMPLES, "samples/*.pt is empty"


def test_check_samples():
    out = ptc("check", *SAMPLES).stdout
    lines = out.splitlines()
    assert len(lines) == len(SAMPLES)  # one kernel per sample
    for path, line in zip(SAMPLES, lines):
        assert line.startswith(f"{path}: ")
    gemm = next(line for line in lines if line.startswith(f"{GEMM}: "))
    assert "gemm(A: f16[M, K], B: f16[K, N]) -> (C: f16[M, N])" in gemm
    assert "M=runtime" in gemm


def test_check_shape_sizes_in_summary():
    out = ptc("check", GEMM, "--shape", "M=200,N=136", "--shape", "K=72").stdout
    assert "M=200" in out and "N=136" in out and "K=72" in out and "runtime" not in out


def test_check_json():
    data = json.loads(ptc("check", GEMM, "--json", "--shape", "K=64").stdout)
    (entry,) = data["files"]
    assert entry["file"] == str(GEMM) and entry["ok"]
    (k,) = entry["kernels"]
    assert k["name"] == "gemm"
    assert k["params"] == [{"name": "A", "dtype": "f16", "dims": ["M", "K"]},
                           {"name": "B", "dtype": "f16", "dims": ["K", "N"]}]
    assert k["outputs"] == [{"name": "C", "dtype": "f16", "dims": ["M", "N"]}]
    assert k["scalars"] == []
    dims = {d["name"]: d for d in k["dims"]}
    assert dims["M"] == {"name": "M", "default": 4096, "size": None}
    assert dims["K"]["size"] == 64
    tiles = {t["name"]: t["choices"] for t in k["tiles"]}
    assert set(tiles) == {"BM", "BN", "BK"} and all(tiles.values())


def test_check_json_scalar_params():
    data = json.loads(ptc("check", ROOT / "samples" / "rmsnorm.pt", "--json").stdout)
    k = data["files"][0]["kernels"][0]
    assert {"name": "eps", "dtype": "f32"} in k["scalars"]
    assert "eps" in k["inputs"]


def test_check_reports_every_file_and_exits_1(tmp_path):
    bad = write(tmp_path, "bad.pt", BAD)
    result = ptc("check", bad, GEMM, tmp_path / "missing.pt", expect=1)
    assert f"{GEMM}: gemm(" in result.stdout  # the good file is still checked
    assert result.stderr == (expected_diagnostics(bad)
                             + f"ptc: error: {tmp_path / 'missing.pt'}: no such file\n")


def test_check_error_text_equals_format_plain(tmp_path):
    bad = write(tmp_path, "bad.pt", BAD)
    result = ptc("check", bad, expect=1)
    assert result.stderr == expected_diagnostics(bad)
    assert f"{bad}:4:25: error: " in result.stderr  # the unknown name `y`
    assert "\n    x = load(A[i, k]) + y\n" in result.stderr
    assert result.stdout == ""


def test_several_errors_are_separated_by_a_blank_line(tmp_path):
    bad = write(tmp_path, "two.pt", BAD.replace("    store(C[i, k], x)",
                                                "    z = load(A[i, k]) + w\n    store(C[i, k], x)"))
    result = ptc("check", bad, expect=1)
    assert result.stderr == expected_diagnostics(bad)
    assert result.stderr.count(f"{bad}:") == 2 and "\n\n" in result.stderr


def test_check_json_with_errors(tmp_path):
    bad = write(tmp_path, "bad.pt", BAD)
    result = ptc("check", bad, GEMM, "--json", expect=1)
    files = json.loads(result.stdout)["files"]
    assert [f["ok"] for f in files] == [False, True]


def test_syntax_error(tmp_path):
    bad = write(tmp_path, "syntax.pt", "kernel k(A: f16[M]) -> (B: f16[M]) {\n  x = (1 +\n}\n")
    result = ptc("check", bad, expect=1)
    assert result.stderr.startswith(f"{bad}:")
    assert ": error: syntax error" in result.stderr
    assert "Traceback" not in result.output


def test_missing_file():
    result = ptc("check", "no/such/file.pt", expect=1)
    assert result.stderr == "ptc: error: no/such/file.pt: no such file\n"


def test_directory(tmp_path):
    result = ptc("check", tmp_path, expect=1)
    assert result.stderr == f"ptc: error: {tmp_path} is a directory, not a .pt file\n"


def test_non_utf8(tmp_path):
    bad = write(tmp_path, "latin1.pt", b"# caf\xe9\nkernel k() -> () {}\n")
    result = ptc("check", bad, expect=1)
    first = result.stderr.splitlines()[0]
    assert re.fullmatch(rf"{re.escape(str(bad))}:1:6: error: .*not UTF-8.*", first), first


def test_empty_file_holds_no_kernels(tmp_path):
    empty = write(tmp_path, "empty.pt", "")
    result = ptc("check", empty, expect=1)
    assert "holds no kernels" in result.stderr
    comments = write(tmp_path, "comments.pt", "# nothing here\n\n")
    assert "holds no kernels" in ptc("check", comments, expect=1).stderr


def test_check_needs_a_file():
    assert "Missing argument" in ptc("check", expect=2).output


# ---- --shape / --tile parsing --------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    ("M", "'M' is not NAME=INT"),
    ("M=x", "'x' in 'M=x' is not an integer"),
    ("M=-3", "M must be a positive integer, not -3"),
    ("M=0", "M must be a positive integer, not 0"),
    ("=4", "has no name before '='"),
    ("1M=4", "'1M' in '1M=4' is not a name"),
    ("M=1,,N=2", "empty item"),
    ("M=4.5", "is not an integer"),
    ("M=" + "9" * 40, "is too large"),
])
@pytest.mark.parametrize("option", ["--shape", "--tile"])
def test_bad_assignment_is_a_usage_error(option, value, message):
    result = ptc("check" if option == "--shape" else "run", GEMM, option, value, expect=2)
    assert f"Invalid value for '{option}'" in result.stderr
    assert message in result.stderr


def test_conflicting_assignments():
    result = ptc("check", GEMM, "--shape", "M=64,N=64", "--shape", "M=128", expect=2)
    assert "M is given twice (64 and 128)" in result.stderr
    ptc("check", GEMM, "--shape", "M=64", "--shape", "M=64")  # the same value twice is fine


def test_assignment_forms_agree():
    one = ptc("check", GEMM, "--shape", "M=64,N=32, K=16").stdout
    many = ptc("check", GEMM, "--shape", "M=64", "--shape", "N=32", "--shape", "K=16").stdout
    assert one == many


def test_assignments_type():
    assert Assignments().convert("M=1,N=2", None, None) == [("M", 1), ("N", 2)]


def test_unknown_dim_in_shape():
    result = ptc("check", GEMM, "--shape", "Q=4", expect=1)
    assert "Q" in result.stderr


# ---- compile -------------------------------------------------------------------------
def test_compile_ast():
    out = ptc("compile", GEMM, "--emit", "ast").stdout
    assert out == print_module(parse(GEMM.read_text(), str(GEMM)))
    assert "# " not in out  # canonical form: no comments


def test_compile_typed():
    from ptc.sema.printer import print_program

    out = ptc("compile", GEMM, "--emit", "typed", "--shape", "K=64").stdout
    assert out == print_program(driver.check_file(GEMM, {"K": 64}))


def test_compile_unknown_stage_lists_choices():
    result = ptc("compile", GEMM, "--emit", "cuda", expect=2)
    assert "Invalid value for '--emit'" in result.stderr
    for stage in driver.STAGES:
        assert f"'{stage}'" in result.stderr


def test_compile_needs_emit():
    assert "--emit" in ptc("compile", GEMM, expect=2).stderr


def test_compile_errors(tmp_path):
    bad = write(tmp_path, "bad.pt", BAD)
    ptc("compile", bad, "--emit", "ast")  # parses fine
    assert ptc("compile", bad, "--emit", "typed", expect=1).stderr == expected_diagnostics(bad)
    assert "no such file" in ptc("compile", tmp_path / "x.pt", "--emit", "ast",
                                 expect=1).stderr


@pytest.mark.parametrize("stage", ["ast", "typed"])
def test_compile_deeply_nested_expression(tmp_path, stage):
    body = " + ".join(["x"] * 200)
    src = SCALE.replace("(load(X[i, j]) as f32) * 2.0",
                        f"(load(X[i, j]) as f32) * 2.0 + 0 * ({body})").replace(
        "    store(", "    x = 1.0\n    store(")
    path = write(tmp_path, "deep.pt", src)
    out = ptc("compile", path, "--emit", stage).stdout
    assert out.count("x") >= 200
    deeper = write(tmp_path, "deeper.pt", src.replace(body, " + ".join(["x"] * 300)))
    err = ptc("compile", deeper, "--emit", stage, expect=1).stderr
    assert "deeper.pt:5:56:" in err and "nested too deeply" in err


# ---- run -----------------------------------------------------------------------------
def test_run_summary_table():
    out = ptc("run", GEMM, *GEMM_SHAPE).stdout
    row = next(line for line in out.splitlines() if re.search(r"\bC\b", line) and "f" in line)
    assert "f16" in row and "[200, 136]" in row
    assert re.search(r"time: [0-9.]+ s", out)


def test_run_inputs_and_output(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((200, 72)).astype(np.float16)
    b = rng.standard_normal((72, 136)).astype(np.float16)
    np.savez(tmp_path / "in.npz", A=a, B=b)
    out = tmp_path / "out.npz"
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", tmp_path / "in.npz", "--output", out)
    assert str(out) in result.stdout
    with np.load(out) as z:
        assert z.files == ["C"]
        c = z["C"]
    assert c.dtype == np.float16 and c.shape == (200, 136)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-2, atol=2e-2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "out.npz"]  # no temp


def test_run_shapes_from_inputs(tmp_path):
    """Dims not given by --shape come from the input arrays."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 50)).astype(np.float16)
    np.savez(tmp_path / "in.npz", A=a, B=b)
    ptc("run", GEMM, "--inputs", tmp_path / "in.npz", "--tile", "BM=64,BN=64,BK=32",
        "--output", tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as z:
        assert z["C"].shape == (70, 50)


def test_run_seed_changes_random_inputs(tmp_path):
    def run(seed):
        ptc("run", GEMM, *GEMM_SHAPE, "--seed", seed, "--output", tmp_path / f"{seed}.npz")
        with np.load(tmp_path / f"{seed}.npz") as z:
            return z["C"]

    assert np.array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))


def test_run_bf16_inputs(tmp_path):
    src = write(tmp_path, "scale.pt", SCALE)
    x = np.linspace(-3, 3, 12 * 16, dtype=np.float32).reshape(12, 16) + 1 / 1024
    results = []
    for name, array in [("f32", x), ("bf16", x.astype(ml_dtypes.bfloat16))]:
        np.savez(tmp_path / f"{name}.npz", X=array)  # bf16 is stored as raw 2-byte voids
        ptc("run", src, "--inputs", tmp_path / f"{name}.npz", "--output",
            tmp_path / f"out-{name}.npz")
        with np.load(tmp_path / f"out-{name}.npz") as z:
            results.append(z["Y"])
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float32) * 2
    np.testing.assert_array_equal(results[0], expected)
    np.testing.assert_array_equal(results[1], expected)


def test_run_scalar_param(tmp_path):
    rmsnorm = ROOT / "samples" / "rmsnorm.pt"
    np.savez(tmp_path / "in.npz", eps=np.float32(1e-5))
    ptc("run", rmsnorm, "--shape", "M=8,N=64", "--inputs", tmp_path / "in.npz",
        "--random-inputs")
    np.savez(tmp_path / "bad.npz", eps=np.ones(3, np.float32))
    result = ptc("run", rmsnorm, "--shape", "M=8,N=64", "--inputs", tmp_path / "bad.npz",
                 expect=1)
    assert "scalar" in result.stderr


def test_run_inputs_must_give_every_input_unless_random_inputs(tmp_path):
    """A scalar (or array) left out of --inputs is an error naming it, not a silent random
    value; --random-inputs draws it; without --inputs everything is random."""
    rmsnorm = ROOT / "samples" / "rmsnorm.pt"
    np.savez(tmp_path / "x.npz", X=np.ones((8, 64), np.float16), W=np.ones(64, np.float16))
    result = ptc("run", rmsnorm, "--shape", "M=8,N=64", "--inputs", tmp_path / "x.npz",
                 expect=1)
    assert "lacks input eps" in result.stderr and "--random-inputs" in result.stderr
    ptc("run", rmsnorm, "--shape", "M=8,N=64", "--inputs", tmp_path / "x.npz",
        "--random-inputs")
    ptc("run", rmsnorm, "--shape", "M=8,N=64")
    result = ptc("run", rmsnorm, "--shape", "M=8,N=64", "--random-inputs", expect=2)
    assert "--random-inputs applies with --inputs" in result.stderr


def test_run_input_with_wrong_name(tmp_path):
    np.savez(tmp_path / "in.npz", A=np.zeros((200, 72), np.float16), Bee=np.zeros(3))
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", tmp_path / "in.npz", expect=1)
    assert result.stderr.startswith("ptc: error: ")
    assert "'Bee'" in result.stderr and "inputs: A, B" in result.stderr
    np.savez(tmp_path / "out.npz", C=np.zeros((200, 136), np.float16))
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", tmp_path / "out.npz", expect=1)
    assert "'C' is an output" in result.stderr


@pytest.mark.parametrize("a_shape, b_shape, needle", [
    ((200, 71), (72, 136), "K = 72 from --shape"),       # against --shape
    ((200, 72, 1), (72, 136), "3 dims"),                  # wrong rank
    ((200, 72), (72, 135), "N = 136 from --shape"),
])
def test_run_input_with_wrong_shape(tmp_path, a_shape, b_shape, needle):
    np.savez(tmp_path / "in.npz", A=np.zeros(a_shape, np.float16),
             B=np.zeros(b_shape, np.float16))
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", tmp_path / "in.npz", expect=1)
    assert needle in result.stderr, result.stderr


def test_run_inputs_disagree_with_each_other(tmp_path):
    np.savez(tmp_path / "in.npz", A=np.zeros((20, 8), np.float16),
             B=np.zeros((9, 16), np.float16))
    result = ptc("run", GEMM, "--inputs", tmp_path / "in.npz", "--tile", "BM=64", expect=1)
    assert "K = 8" in result.stderr and "from A" in result.stderr


@pytest.mark.parametrize("content, needle", [
    (None, "no such file"),
    (b"not a zip", "not a readable .npz"),
])
def test_run_unreadable_inputs(tmp_path, content, needle):
    path = tmp_path / "in.npz"
    if content is not None:
        path.write_bytes(content)
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", path, expect=1)
    assert needle in result.stderr


def test_run_npy_instead_of_npz(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(3))
    result = ptc("run", GEMM, *GEMM_SHAPE, "--inputs", tmp_path / "a.npy", expect=1)
    assert "np.savez" in result.stderr


@pytest.mark.parametrize("shape", ["M=100000000000000,N=64,K=64",
                                   "M=999999999999999999,N=100000000,K=64"])
def test_run_too_large_for_memory(shape):
    result = ptc("run", GEMM, "--shape", shape, expect=1)
    assert "smaller --shape" in result.stderr


def test_run_kernel_selection(tmp_path):
    src = write(tmp_path, "two.pt", TWO_KERNELS)
    result = ptc("run", src, "--shape", "M=16", expect=1)
    assert "holds 2 kernels" in result.stderr and "--kernel" in result.stderr
    out = ptc("run", src, "--kernel", "twice", "--shape", "M=16").stdout
    assert "Y" in out
    result = ptc("run", src, "--kernel", "thrice", "--shape", "M=16", expect=1)
    assert "no kernel named 'thrice'" in result.stderr


def test_run_program_error(tmp_path):
    bad = write(tmp_path, "bad.pt", BAD)
    assert ptc("run", bad, expect=1).stderr == expected_diagnostics(bad)


def test_run_output_into_missing_directory(tmp_path):
    result = ptc("run", GEMM, *GEMM_SHAPE, "--output", tmp_path / "no" / "out.npz", expect=1)
    assert "cannot write" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_run_output_is_atomic(tmp_path, monkeypatch):
    """A failed write leaves neither a partial file nor a temporary one; an old file stays."""
    out = tmp_path / "out.npz"
    out.write_bytes(b"old")

    def broken_savez(file, **arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken_savez)
    result = ptc("run", GEMM, *GEMM_SHAPE, "--output", out, expect=1)
    assert "No space left on device" in result.stderr
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]


def test_ctrl_c_exits_130_quietly(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "interpret", interrupted)
    result = ptc("run", GEMM, *GEMM_SHAPE, expect=130)
    assert result.output == ""


def test_internal_error_exits_3_without_traceback(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(driver, "interpret", broken)
    result = CliRunner().invoke(cli, ["run", str(GEMM), *GEMM_SHAPE],
                                env={"PTC_DEBUG": None})
    assert result.exit_code == 3
    assert result.stderr == ("ptc: internal error: ValueError: boom "
                             "(set PTC_DEBUG=1 for the traceback)\n")
    assert "Traceback" not in result.output


# ---- report --------------------------------------------------------------------------
DIAG = Diagnostic("unknown name 'y'", Span(2, 7, 2, 8), hint="did you mean 'x'?")
SOURCE = "x = 1\nz = x + y\n"


def test_report_plain_equals_format_plain():
    out = io.StringIO()
    render(DIAG, "f.pt", SOURCE, file=out)
    assert out.getvalue() == format_plain(DIAG, "f.pt", SOURCE) + "\n"
    assert out.getvalue() == ("f.pt:2:7: error: unknown name 'y'\n"
                              "z = x + y\n"
                              "      ^\n"
                              "hint: did you mean 'x'?\n")


def test_render_error_blank_line_and_unlocated():
    error = CompileError([DIAG, Diagnostic("no such file x.pt")])
    out = io.StringIO()
    render_error(error, "f.pt", SOURCE, file=out, unlocated="ptc")
    assert out.getvalue() == (format_plain(DIAG, "f.pt", SOURCE) + "\n\n"
                              + "ptc: error: no such file x.pt\n")


def test_report_colour_has_the_same_text():
    out = io.StringIO()
    render(DIAG, "f.pt", SOURCE, file=out, color=True)
    coloured = out.getvalue()
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == format_plain(DIAG, "f.pt", SOURCE) + "\n"


def test_report_markup_in_source_is_not_interpreted():
    diag = Diagnostic("bad [bold]x[/bold]", Span(1, 1, 1, 2))
    out = io.StringIO()
    render(diag, "f.pt", "A[i, :] [red]\n", file=out, color=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert plain == format_plain(diag, "f.pt", "A[i, :] [red]\n") + "\n"


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_use_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(FakeTTY()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(FakeTTY())
    out = FakeTTY()
    render(DIAG, "f.pt", SOURCE, file=out)
    assert out.getvalue() == format_plain(DIAG, "f.pt", SOURCE) + "\n"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert use_color(io.StringIO())


# ---- the installed script ------------------------------------------------------------
def _script() -> str:
    script = Path(sys.executable).with_name("ptc")
    assert script.exists(), f"{script} is missing: pip install -e ."
    return str(script)


def test_installed_script(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    ok = subprocess.run([_script(), "check", str(GEMM)], capture_output=True, text=True,
                        env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"{GEMM}: gemm(")
    bad = write(tmp_path, "bad.pt", BAD)
    failed = subprocess.run([_script(), "check", str(bad)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert failed.returncode == 1
    assert failed.stderr == expected_diagnostics(bad)  # a pipe is not a terminal: plain
    usage = subprocess.run([_script(), "check", str(GEMM), "--shape", "M"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


# ---- inputs that were misread (issue 8): a BOM, a plan file's name, flag names -----------
def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    text = (ROOT / "samples" / "gemm.pt").read_bytes()
    path = write(tmp_path, "bom.pt", b"\xef\xbb\xbf" + text)
    out = ptc("check", path).output
    assert "gemm(A: f16[M, K]" in out


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_a_build_folders_plan_is_what_emit_plan_prints(target, tmp_path):
    """`make samples` keeps each build folder's plan.json as out/plans/NAME.TARGET.json
    (tools/samples.py) instead of asking `--emit plan` again."""
    gemm = ROOT / "samples" / "gemm.pt"
    ptc("compile", gemm, "-t", target, "-o", tmp_path / "build")
    emitted = ptc("compile", gemm, "-t", target, "--emit", "plan").output
    assert (tmp_path / "build" / "plan.json").read_text() == emitted


def test_a_schedule_file_that_is_not_utf8_is_named_in_the_error(tmp_path):
    bad = write(tmp_path, "bad.json", b"\xff\xfe{")
    out = ptc("compile", ROOT / "samples" / "gemm.pt", "-t", "sm80", "--emit", "plan",
              "--schedule", bad, expect=1).output
    assert f"{bad}:1:1: the file is not UTF-8 text" in out
    assert "ptc:1:1" not in out


@pytest.mark.parametrize("args", [
    ("run", "--shape", "Q=5"),
    ("run", "--tile", "QQ=5"),
    ("compile", "--emit", "plan", "-t", "sm80", "--tile", "QQ=64"),
    ("compile", "--emit", "stask", "--tile", "QQ=64"),
    ("explain", "-t", "sm80", "--tile", "QQ=64"),
])
def test_flags_naming_what_the_kernel_lacks_are_usage_errors(args):
    out = ptc(args[0], ROOT / "samples" / "gemm.pt", *args[1:], expect=2).output
    assert "error:" in out and ("no tile size QQ" in out or "--shape gives Q" in out)


def test_tile_beside_a_pinned_schedule_is_a_usage_error(tmp_path):
    gemm = ROOT / "samples" / "gemm.pt"
    plan = write(tmp_path, "plan.json", ptc("compile", gemm, "-t", "sm80", "--emit", "plan").output)
    out = ptc("compile", gemm, "-t", "sm80", "--emit", "plan", "--schedule", plan,
              "--tile", "BM=64", expect=2).output
    assert "--tile does not apply with --schedule" in out
    ptc("build", gemm, "-t", "sm80", "--schedule", plan, "--tile", "BM=64",
        "-o", tmp_path / "b", expect=2)


@pytest.mark.nvcc
def test_a_failed_build_leaves_the_earlier_build_in_place(tmp_path):
    """`-o DIR` is replaced only by a complete new build (issue 8): a failing
    --kernel-source builds in DIR.new, and DIR keeps the good one."""
    gemm = ROOT / "samples" / "gemm.pt"
    out = tmp_path / "gemm"
    ptc("build", gemm, "-t", "sm80", "-o", out)
    good = (out / "kernel.cu").read_text()
    broken = write(tmp_path, "broken.cu", "this is not CUDA\n")
    text = ptc("build", gemm, "-t", "sm80", "-o", out, "--kernel-source", broken,
               expect=1).output
    assert "gemm.new" in text
    assert (out / "kernel.cu").read_text() == good and (out / "libptc_kernel.so").is_file()
    assert (tmp_path / "gemm.new" / "kernel.cu").read_text() == "this is not CUDA\n"
    ptc("build", gemm, "-t", "sm80", "-o", out)      # and a later good build cleans up
    assert not (tmp_path / "gemm.new").exists()


@pytest.mark.nvcc
def test_compile_build_writes_and_builds_the_directory(tmp_path):
    softmax = ROOT / "samples" / "softmax.pt"
    out = tmp_path / "softmax"
    text = ptc("compile", softmax, "-t", "sm80", "-o", out, "--build").output
    assert f"built {out}" in text
    assert (out / "libptc_kernel.so").is_file() and (out / "ptc_run").is_file()
    usage = ptc("compile", softmax, "-t", "sm80", "--build", expect=2).output
    assert "--build needs -o DIR" in usage


@pytest.mark.nvcc
def test_a_build_into_a_relative_folder_runs_the_compiler_there(tmp_path, monkeypatch):
    """`ptc build -o out/x` (as `make samples` runs it): the compilers run in that folder
    with their temporaries in a folder of ours, which must be named absolutely (a relative
    TMPDIR made nvcc look for out/x/out/x/...) and is gone afterwards."""
    monkeypatch.chdir(tmp_path)
    ptc("build", GEMM, "-t", "sm80", "-o", "out/gemm", env={"PTC_STAGE_CACHE": "0"})
    built = tmp_path / "out" / "gemm"
    assert (built / "libptc_kernel.so").is_file()
    assert not list(built.glob(".compiler-tmp-*"))
