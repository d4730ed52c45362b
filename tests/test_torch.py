"""ptc.torch (issue 23): .pt kernels as torch.library custom ops on the CPU path, checked
against torch formulas written here, torch.library.opcheck, torch.compile and gradcheck.
The tier `make test-torch` runs this file (marker `torch`, deselected from `make test`);
it skips when torch is not installed."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import ptc.torch as pt  # noqa: E402
from ptc.runtime.errors import ArgumentError  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
RMSNORM = str(ROOT / "samples" / "rmsnorm.pt")
GRAD = str(ROOT / "examples" / "llama3" / "layer_grad.pt")


def rmsnorm_ref(x, w, eps):
    """Y = X * rsqrt(mean(X^2) + eps) * W, in the precision of x."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def inputs(m=6, n=32, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype))


def test_importing_ptc_imports_no_torch():
    code = ("import sys, ptc, ptc.torch, ptc.runtime; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_without_torch_a_one_line_error_says_how_to_get_it():
    code = ("import sys; sys.modules['torch'] = None; import ptc.torch\n"
            "try:\n    ptc.torch.kernel('samples/rmsnorm.pt')\n"
            "except Exception as e:\n    print(type(e).__name__, e, '|', e.hint)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == ("RuntimeFailure ptc.torch needs PyTorch, which is not "
                                  "installed | pip install 'ptc[torch]' (or `make torch`)")


def test_a_torch_without_custom_op_is_refused(monkeypatch):
    from ptc.runtime.errors import RuntimeFailure

    monkeypatch.setattr(torch, "__version__", "2.3.1+cpu")
    with pytest.raises(RuntimeFailure, match=r"needs PyTorch 2\.4 or later .*not 2\.3\.1"):
        pt.kernel(RMSNORM)


def test_op_matches_torch_formula():
    k = pt.kernel(RMSNORM)
    x, w = inputs()
    y = k(x, w, 1e-6)
    assert y.dtype == torch.float16 and y.shape == x.shape
    want = rmsnorm_ref(x.float(), w.float(), 1e-6).half()
    torch.testing.assert_close(y, want, atol=2e-3, rtol=2e-3)
    assert repr(k).startswith("<ptc.torch kernel ptc::rmsnorm_")


def test_same_kernel_same_op():
    assert pt.kernel(RMSNORM) is pt.kernel(RMSNORM)
    assert pt.kernel(RMSNORM).op is not pt.kernel(RMSNORM, backend="emulate").op


def test_compile_time_dims_specialize_per_call():
    """N is a compile-time dim of rmsnorm (a `:` extent): each N gets its own checked kernel."""
    k = pt.kernel(RMSNORM)
    for n in (16, 48):
        x, w = inputs(n=n)
        torch.testing.assert_close(k(x, w, 1e-6), rmsnorm_ref(x.float(), w.float(), 1e-6).half(),
                                   atol=2e-3, rtol=2e-3)
    assert {16, 48} <= {dict(key)["N"] for key in k.runners}


@pytest.mark.cxx
def test_emulated_kernel_equals_interpreter():
    x, w = inputs(m=5, n=64)
    interp = pt.kernel(RMSNORM)(x, w, 1e-5)
    k = pt.kernel(RMSNORM, backend="emulate", target="sm80")
    emulated = k(x, w, 1e-5)
    torch.testing.assert_close(emulated, interp, atol=1e-3, rtol=0)
    runner = k.specialized({"M": 5, "N": 64})
    assert [key[:2] for key in runner.builds] == [("emulate", "sm80")]  # built once, per dims


def test_fake_implementation_from_the_signature():
    from torch._subclasses.fake_tensor import FakeTensorMode

    k = pt.kernel(GRAD, kernel="rmsnorm_fwd")
    with FakeTensorMode():
        x, w = torch.empty(7, 24), torch.empty(24)
        y, r = k(x, w, 1e-5)
    assert (tuple(y.shape), y.dtype, tuple(r.shape), r.dtype) == \
        ((7, 24), torch.float32, (7,), torch.float32)


def test_opcheck():
    """torch's own checks of a custom op: schema, fake vs real, no aliasing."""
    x, w = inputs(n=16)
    torch.library.opcheck(pt.kernel(RMSNORM).op, (x, w, 1e-6),
                          test_utils=("test_schema", "test_faketensor"))


def test_torch_compile_fullgraph_no_break():
    k = pt.kernel(RMSNORM)
    x, w = inputs(n=32)

    def f(x, w):
        return k(x, w, 1e-6) * 2 + 1

    explained = torch._dynamo.explain(f)(x, w)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, w), f(x, w), atol=0, rtol=0)


def test_torch_compile_dynamic_shapes_and_keywords():
    """Under dynamic=True the fake implementation binds symbolic sizes; keywords bind by
    the kernel's parameter names."""
    k = pt.kernel(RMSNORM)
    compiled = torch.compile(lambda x, w: k(x, W=w, eps=1e-6), fullgraph=True, dynamic=True,
                             backend="aot_eager")
    for m in (8, 5, 3):
        x, w = inputs(m=m, n=32)
        torch.testing.assert_close(compiled(x, w), k(x, w, 1e-6), atol=0, rtol=0)


@pytest.mark.cxx
def test_torch_compile_inductor():
    k = pt.kernel(RMSNORM)
    x, w = inputs(n=32)
    compiled = torch.compile(lambda x, w: k(x, w, 1e-6).float().sum(-1), fullgraph=True)
    torch.testing.assert_close(compiled(x, w), k(x, w, 1e-6).float().sum(-1))


def test_a_tuning_entry_is_pinned_and_a_stale_one_ignored(monkeypatch):
    """A build per dims takes the tuning database's plan where ptc.tune.choose finds an
    entry, and the search's where that plan no longer builds."""
    from ptc import driver
    from ptc.sched.plan import plans_to_json

    dims = {"M": 8, "N": 32}
    runner = pt.kernel(RMSNORM, backend="emulate").specialized(dims)
    searched = runner.prepare("sm80", dims).plans[0]
    ranked = driver.schedule_grids(runner.typed, "sm80", shapes=dims)[0].ranked
    other = next(c.plan for c in ranked if c.plan.tiles != searched.tiles)

    class Choice:
        entry = "an entry"
        plan = driver.PlanText("ptc-tuning.json (entry 1)", plans_to_json((other,)))

    monkeypatch.setattr("ptc.tune.choose", lambda *args, **options: Choice)
    assert runner.prepare("sm80", dims).plans[0].tiles == other.tiles
    Choice.plan = driver.PlanText("ptc-tuning.json (entry 2)", '{"kernel": "rmsnorm"}')
    assert runner.prepare("sm80", dims).plans[0].tiles == searched.tiles


# ---- the runtime's call checks -----------------------------------------------------------
@pytest.mark.parametrize("bad, message", [
    (lambda x, w: (x.float(), w), "input X (X: f16[M, N]) is f16, but the tensor given holds f32"),
    (lambda x, w: (x.double(), w), "input X (X: f16[M, N]) is f16, but the tensor given holds "
                                   "torch.float64"),
    (lambda x, w: (x.t(), w), "input X (X: f16[M, N]) is not C-contiguous"),
    (lambda x, w: (x, w[:8]), "input W (W: f16[N]) has shape (8,), so N = 8, but N = 32 from X"),
    (lambda x, w: (x, w.to("meta")), "input W (W: f16[N]) is on meta, but X is on cpu"),
])
def test_call_errors_are_the_runtimes(bad, message):
    x, w = inputs(n=32)
    with pytest.raises(ArgumentError) as info:
        pt.kernel(RMSNORM)(*bad(x, w), 1e-6)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_the_runtime_says_the_same_of_a_device_array():
    """The messages above are binding.py's: a DeviceRef of the same dtype gets the same one."""
    from ptc.runtime.arrays import ArrayAdapter, DeviceRef
    from ptc.runtime.binding import bind_call

    class Device(ArrayAdapter):
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

        def ref(self):
            return DeviceRef(0, self.shape, self.dtype)

    sig = pt.kernel(RMSNORM).signature
    with pytest.raises(ArgumentError, match=r"^input X \(X: f16\[M, N\]\) is f16, but the "
                                            r"device array given holds f32"):
        bind_call(sig, {}, [Device((4, 4096), "f32"), Device((4096,), "f16"), 1.0], {}, None)


def test_unknown_backend():
    with pytest.raises(ArgumentError, match="backend='cuda' is not a CPU path"):
        pt.kernel(RMSNORM, backend="cuda")


# ---- autograd ----------------------------------------------------------------------------
def rmsnorm_grad(backend="interp", bwd_x="rmsnorm_bwd_x", path=GRAD):
    def k(name, file=GRAD):
        return pt.kernel(file, kernel=name, backend=backend)

    return pt.autograd(forward=k("rmsnorm_fwd"), backward=[k(bwd_x, path), k("rmsnorm_bwd_w")],
                       save=("X", "W", "R"), outputs=("Y",))


def grad_inputs(m=5, n=16):
    g = torch.Generator().manual_seed(3)
    return (torch.randn(m, n, generator=g, requires_grad=True),
            (torch.rand(n, generator=g) + 0.5).requires_grad_())


# f32 is ptc's widest float: finite differences of an f32 function at eps=1e-3 carry about
# ulp(f32) / eps ~ 1e-4 relative error, hence atol/rtol 1e-2; the exact comparison is
# test_gradients_equal_float64_autograd's.
GRADCHECK = dict(eps=1e-3, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("backend", ["interp", pytest.param("emulate", marks=pytest.mark.cxx)])
def test_gradcheck(backend):
    f = rmsnorm_grad(backend)
    with pytest.warns(UserWarning, match="not a double precision"):
        assert torch.autograd.gradcheck(lambda x, w: f(x, w, 1e-5), grad_inputs(), **GRADCHECK)


def test_gradients_equal_float64_autograd():
    f = rmsnorm_grad()
    x, w = grad_inputs()
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))
    f(x, w, 1e-5).backward(g)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    rmsnorm_ref(x64, w64, 1e-5).backward(g.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.grad.double(), w64.grad, atol=1e-5, rtol=1e-5)


def test_gradcheck_fails_on_a_wrong_backward(tmp_path):
    """The check can fail: dX without its second term (the rowsum's) is refused."""
    from torch.autograd.gradcheck import GradcheckError

    wrong = tmp_path / "wrong.pt"
    text = Path(GRAD).read_text()
    assert "g * r[:, None] - x * c[:, None]" in text
    wrong.write_text(text.replace("g * r[:, None] - x * c[:, None]", "g * r[:, None]"))
    f = rmsnorm_grad(path=str(wrong))
    with pytest.warns(UserWarning), pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda x, w: f(x, w, 1e-5), grad_inputs(), **GRADCHECK)


def test_backward_under_torch_compile():
    f = rmsnorm_grad()
    x, w = grad_inputs()
    f(x, w, 1e-5).square().sum().backward()
    want = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    compiled = torch.compile(lambda x, w: f(x, w, 1e-5).square().sum(), fullgraph=True,
                             backend="aot_eager")
    compiled(x, w).backward()
    torch.testing.assert_close((x.grad, w.grad), want)


@pytest.mark.parametrize("change, message", [
    (dict(save=("X", "W")), "backward kernel rmsnorm_bwd_x reads R, which is not saved"),
    (dict(save=("X", "W", "R", "Q")), "save= names Q, which is neither an input nor an output"),
    (dict(outputs=("Z",)), "outputs= names Z, which is not an output of rmsnorm_fwd"),
    (dict(backward=[(pt.kernel(GRAD, kernel="rmsnorm_bwd_x"), {"Q": "R"})]),
     "backward kernel rmsnorm_bwd_x has no parameter Q to rename"),
    (dict(backward=[(pt.kernel(GRAD, kernel="rmsnorm_bwd_x"), {"dX": "dx"})]),
     "backward kernel rmsnorm_bwd_x writes dx, which is neither the gradient"),
    (dict(backward=["rmsnorm_bwd_x"]), "a backward step is a ptc.torch.kernel"),
])
def test_pairing_errors(change, message):
    k = lambda name: pt.kernel(GRAD, kernel=name)  # noqa: E731
    args = dict(forward=k("rmsnorm_fwd"), backward=[k("rmsnorm_bwd_x"), k("rmsnorm_bwd_w")],
                save=("X", "W", "R"), outputs=("Y",))
    with pytest.raises(ArgumentError, match=message):
        pt.autograd(**{**args, **change})


# ---- examples/llama3: a decoder layer from ptc kernels -----------------------------------
def load_example(name: str):
    import importlib.util

    path = ROOT / "examples" / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module            # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def bf16_ulps(diff: float, scale: float) -> float:
    """`diff` in units of the bf16 spacing at `scale` (8 significant bits)."""
    import math

    return diff / 2.0 ** (math.floor(math.log2(scale)) - 7)


@pytest.mark.cxx                # Inductor compiles C++
@pytest.mark.parametrize("backend", ["interp", pytest.param("emulate", marks=pytest.mark.cxx)])
def test_llama3_layer_matches_torch_reference_compiled(backend):
    layer = load_example("llama3/layer.py")
    got = layer.compare(backend, batch=2, seq=24)
    assert got["graph_breaks"] == 0
    assert got["compiled_vs_eager"] == 0
    assert bf16_ulps(got["eager"], got["scale"]) <= 2, got


@pytest.mark.parametrize("backend", ["interp", pytest.param("emulate", marks=pytest.mark.cxx)])
@pytest.mark.parametrize("case", ["mlp", "attention", "layer"])
def test_llama3_backward_kernels_pass_gradcheck(case, backend):
    """The MLP (one weight-gradient kernel serving three steps under other names), causal
    GQA attention (dQ; dK and dV summed over a group's query heads) and the whole layer,
    every gradient a .pt kernel: gradcheck, and float64 autograd of a torch reference."""
    got = load_example("llama3/backward.py").check(case, backend)
    assert got["gradcheck"] is True
    assert got["max_relative_grad_difference"] < 1e-5, got


# ---- the CUDA tensors' path, on the fake CUDA runtime ------------------------------------
@pytest.mark.cxx
def test_cuda_path_on_the_fake_cuda_runtime(tmp_path, monkeypatch):
    """Runner.launch (what CUDA tensors take) against tests/runtime's axpy harness built by
    g++ on tests/runtime/fake_cuda, a CUDA runtime on host memory, so that CPU tensors stand
    in for CUDA ones: the inputs are read where they lie and the output tensors written in
    place (the harness zeroes them first, on the launch's stream: they start as garbage
    here), and the call is queued on torch's current stream without a single wait, as a
    torch op's is."""
    import ctypes

    import ptc.runtime as R
    import ptc.torch.run as run
    from ptc.runtime.build import LIBRARY

    runtime = ROOT / "tests" / "runtime"
    k = pt.kernel(runtime / "axpy.pt", target="sm80")
    folder = R.write_build_dir(tmp_path / "axpy", kernel_source=(runtime / "axpy_host.cpp")
                               .read_text(), signature=k.signature, arch="sm_80",
                               target="sm80")
    subprocess.run(["g++", "-std=c++17", "-O1", "-I", str(runtime / "fake_cuda"), "-I", ".",
                    "-x", "c++", "kernel.cu", "-x", "c++", "harness.cu", "signature.cc",
                    "-fPIC", "-shared", "-o", LIBRARY], cwd=folder, check=True)
    compiled = R.CompiledKernel(folder, k.signature, arch="sm_80")
    monkeypatch.setattr(k.runner, "build", lambda kind, dims, make: compiled)
    monkeypatch.setattr(run, "current_stream", lambda device: 0x5EED)
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(50, 40, generator=g), torch.randn(50, 40, generator=g).bfloat16()
    runner, call = k.bind((a, b, 1.5), fake=False)
    outputs = {n: torch.full(t.shape, float("nan"), dtype=t.dtype)
               for n, t in k.empty_outputs(call, torch.device("cpu"), zeroed=False).items()}
    where = {n: t.data_ptr() for n, t in outputs.items()}
    runner.launch(call, (a, b, 1.5), outputs, torch.device("cpu"))
    assert {n: t.data_ptr() for n, t in outputs.items()} == where
    want = a + 1.5 * b.float()
    torch.testing.assert_close(outputs["C"], want)
    torch.testing.assert_close(outputs["S"], want.sum(1), atol=1e-4, rtol=1e-5)
    lib = compiled.library().lib
    assert ctypes.c_int.in_dll(lib, "fake_cuda_waits").value == 0
    assert ctypes.c_void_p.in_dll(lib, "fake_cuda_last_stream").value == 0x5EED
    # a build whose tile does not divide the call's dims is refused before any launch
    monkeypatch.setattr(compiled, "signature", replace(
        k.signature, multiples=(("M", "BM", 64, "divides(BM, M)"),)))
    with pytest.raises(ArgumentError, match="M=50 is not a multiple of BM=64"):
        runner.launch(call, (a, b, 1.5), outputs, torch.device("cpu"))


# ---- examples/mamba2: a Mamba2 block from ptc kernels ------------------------------------
@pytest.mark.cxx                # Inductor compiles C++
@pytest.mark.parametrize("backend", ["interp", pytest.param("emulate", marks=pytest.mark.cxx)])
def test_mamba2_block_matches_torch_recurrence_compiled(backend):
    """The chunked SSD kernels against the plain recurrence, under torch.compile."""
    import math

    got = load_example("mamba2/block.py").compare(backend, batch=2, chunks=3)
    assert got["graph_breaks"] == 0
    assert got["compiled_vs_eager"] == 0
    f16_spacing = 2.0 ** (math.floor(math.log2(got["scale"])) - 10)
    assert got["eager"] <= 2 * f16_spacing, got


def test_the_chunked_mamba2_baseline_is_the_recurrence():
    """benchmarks/layers.py times the block against torch_mamba2_chunked: it must be the
    same function as the step-by-step recurrence (f16 outputs, equal to a spacing)."""
    block = load_example("mamba2/block.py")
    cfg = block.Config()
    p = block.parameters(cfg, 3)
    u = torch.randn(2, 4 * cfg.chunk, cfg.d_model, generator=torch.Generator().manual_seed(4))
    want = block.torch_mamba2(cfg, u.half(), p).float()
    got = block.torch_mamba2_chunked(cfg, u.half(), p).float()
    torch.testing.assert_close(got, want, atol=2e-3, rtol=2e-3)
    # a chunked scan that forgets to pass the states from chunk to chunk is caught
    passing = block.segment_sums
    block.segment_sums = lambda a: passing(a) if a.shape[-1] == cfg.chunk else \
        torch.full(a.shape + a.shape[-1:], -torch.inf)
    try:
        wrong = block.torch_mamba2_chunked(cfg, u.half(), p).float()
    finally:
        block.segment_sums = passing
    assert (wrong - want).abs().max() > 0.05


# ---- benchmarks/layers.py: the layers against eager and Inductor --------------------------
@pytest.mark.cxx                # Inductor compiles C++
def test_the_layers_benchmark_runs_every_layer_on_the_cpu(tmp_path, capsys):
    """The GPU benchmark's code path at tiny shapes on the CPU (the interpreter): a row per
    layer, ptc's output checked against the baseline, every side timed. No time is
    asserted: CPU times say nothing of a GPU."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import layers

    out = tmp_path / "layers.json"
    assert layers.main(["--device", "cpu", "--repeat", "1", "--json", str(out)]) == 0
    rows = {r["layer"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == ["llama3", "llama3_train", "mamba2"]
    assert rows["llama3_train"]["pass"] == "forward+backward"
    assert rows["llama3"]["max_diff"] < 0.1            # the baseline computes in bf16
    assert rows["llama3_train"]["max_diff"] < 1e-4     # both in f32
    assert rows["mamba2"]["max_diff"] < 0.01           # f16 outputs
    for r in rows.values():
        assert all(r[f"{side}_ms"] > 0 for side in ("ptc", "eager", "inductor"))
    printed = capsys.readouterr().out
    assert "inductor/ptc" in printed and "llama3_train" in printed
