"""The Python package across real processes (run by commrun over ucx, ofi,
gloo; or alone as one rank over local): every collective on numpy arrays,
blocking and non-blocking, in place and out=, every dtype and op of
allreduce, DLPack-only objects, bfloat16 through ml_dtypes, torch tensors when
torch is installed, and the errors. Every expected value is computed here with
numpy from what each rank contributed.

    commrun -n 2 --transport ucx -- python3 test_collectives.py
"""

import sys
import threading
import time

import numpy as np

import comm

SIGNED = {np.int8, np.int32, np.int64, np.float16, np.float32, np.float64}
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64]
OPS = ["sum", "prod", "min", "max", "avg"]


def value(rank, n, op, dtype):
    """Rank r's input: small integers, so every sum and product is exact."""
    i = np.arange(n)
    if op == "prod":
        minus = ((rank + 2 * i) % 4 == 1) & (dtype in SIGNED)
        return np.where((rank + i) % 3 == 0, 2, np.where(minus, -1, 1)).astype(dtype)
    v = (rank * 7 + i * 13) % 17
    return (v if dtype == np.uint8 else v - 8).astype(dtype)


def reference(size, n, op, dtype):
    everyone = np.stack([value(r, n, op, dtype).astype(np.float64) for r in range(size)])
    if op == "avg":
        total = everyone.sum(axis=0) / size
        return (total if np.issubdtype(dtype, np.floating) else np.trunc(total)).astype(dtype)
    return {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op](everyone, axis=0).astype(dtype)


def expect_equal(got, want, what, op="sum"):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if op == "avg" and np.issubdtype(want.dtype, np.floating):
        tol = 1e-2 if want.dtype == np.float16 else 1e-6
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        ok = np.array_equal(got, want)
    assert ok, f"{what}: got {got.ravel()[:8]}..., expected {want.ravel()[:8]}..."


def expect_error(code, needle, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except comm.Error as e:
        assert e.code == code, f"raised {e.code} ({e}), expected {code}"
        assert needle in str(e), f"message '{e}' does not mention '{needle}'"
        return e
    raise AssertionError(f"{fn.__name__} did not raise comm.Error({code})")


def test_allreduce_dtypes_ops(c):
    for dtype in DTYPES:
        for op in OPS:
            for shape in [(0,), (37,), (3, 5)]:
                n = int(np.prod(shape))
                want = reference(c.size, n, op, dtype).reshape(shape)
                x = value(c.rank, n, op, dtype).reshape(shape)
                got = c.allreduce(x, op)
                assert got is x, "in place: allreduce returns its argument"
                expect_equal(x, want, f"allreduce {np.dtype(dtype).name} {op} {shape} in place", op)
                x = value(c.rank, n, op, dtype).reshape(shape)
                out = np.full(shape, 99, dtype)
                got = c.allreduce(x, getattr(comm.ReduceOp, op), out=out)
                assert got is out, "out=: allreduce returns out"
                expect_equal(out, want, f"allreduce {np.dtype(dtype).name} {op} {shape} out=", op)
                expect_equal(x, value(c.rank, n, op, dtype).reshape(shape), "allreduce left its input")


def test_large_and_views(c):
    # Several pipeline chunks; and a contiguous slice of a bigger array, written in place.
    n = 300_001
    x = value(c.rank, n, "sum", np.float32)
    c.allreduce(x)
    expect_equal(x, reference(c.size, n, "sum", np.float32), "large allreduce")
    base = np.zeros(100, np.int64)
    window = base[10:20]
    window[:] = value(c.rank, 10, "max", np.int64)
    c.allreduce(window, "max")
    expect_equal(base[10:20], reference(c.size, 10, "max", np.int64), "allreduce into a slice")
    assert not base[:10].any() and not base[20:].any(), "allreduce wrote outside the slice"


class DLPackOnly:
    """An object offering nothing but DLPack, like a tensor of another framework."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kw):
        return self.array.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack(c):
    x = value(c.rank, 13, "sum", np.float64)
    c.allreduce(DLPackOnly(x))
    expect_equal(x, reference(c.size, 13, "sum", np.float64), "allreduce through DLPack")


def test_bfloat16(c):
    try:
        import ml_dtypes
    except ImportError:
        print(f"rank {c.rank}: bfloat16 checks skipped: ml_dtypes is not installed (pip install ml_dtypes)")
        return
    for op in ["sum", "max", "avg"]:
        x = value(c.rank, 21, op, np.float32).astype(ml_dtypes.bfloat16)
        c.allreduce(x, op)
        want = reference(c.size, 21, op, np.float32).astype(ml_dtypes.bfloat16)
        assert np.allclose(x.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2), \
            f"bfloat16 {op}: {x[:6]} vs {want[:6]}"


def test_torch(c):
    try:
        import torch
    except ImportError:
        print(f"rank {c.rank}: torch checks skipped: torch is not installed")
        return
    t = torch.from_numpy(value(c.rank, 17, "sum", np.float32))
    c.allreduce(t)
    expect_equal(t.numpy(), reference(c.size, 17, "sum", np.float32), "allreduce of a torch tensor")
    b = torch.arange(6, dtype=torch.bfloat16) + c.rank
    out = torch.empty_like(b)
    c.allreduce(b, "max", out=out)
    assert torch.equal(out, torch.arange(6, dtype=torch.bfloat16) + (c.size - 1)), f"torch bfloat16 max: {out}"
    g = c.allgather(torch.full((2,), c.rank, dtype=torch.int32))
    assert isinstance(g, torch.Tensor) and g.tolist() == [r for r in range(c.size) for _ in range(2)], g
    if c.transport == "nccl" and torch.cuda.is_available():
        d = torch.full((8,), float(c.rank + 1), device="cuda")
        c.allreduce(d)  # on torch's current stream
        torch.cuda.current_stream().synchronize()
        assert d.cpu().tolist() == [c.size * (c.size + 1) / 2] * 8, d
    else:
        print(f"rank {c.rank}: CUDA tensor checks skipped: they need the nccl transport and a GPU")


def test_gathers_and_scatters(c):
    n, size, rank = 5, c.size, c.rank
    x = value(rank, n * size, "sum", np.int32)
    got = c.reduce_scatter(x)
    expect_equal(got, reference(size, n * size, "sum", np.int32)[rank * n:(rank + 1) * n], "reduce_scatter")
    out = np.empty(n, np.int32)
    assert c.reduce_scatter(x, "min", out=out) is out
    expect_equal(out, reference(size, n * size, "min", np.int32)[rank * n:(rank + 1) * n], "reduce_scatter out=")

    mine = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * rank
    got = c.allgather(mine)
    expect_equal(got, np.concatenate([np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r for r in range(size)]),
                 "allgather")
    out = np.empty(6 * size, np.float32)
    c.allgather(mine, out=out)
    expect_equal(out, got.ravel(), "allgather out=")

    root = size - 1
    b = np.arange(9, dtype=np.float64) * 0.5 if rank == root else np.full(9, -1.0)
    assert c.broadcast(b, root) is b
    expect_equal(b, np.arange(9, dtype=np.float64) * 0.5, "broadcast")

    r_root = 1 % size
    x = value(rank, 11, "sum", np.int64)
    got = c.reduce(x, "sum", r_root)
    if rank == r_root:
        assert got is x
        expect_equal(x, reference(size, 11, "sum", np.int64), "reduce at the root")
    else:
        assert got is None, "reduce returns None off the root"
        expect_equal(x, value(rank, 11, "sum", np.int64), "reduce left a non-root's input")


def test_all_to_all(c):
    size, rank = c.size, c.rank
    x = np.array([rank * 1000 + j * 100 + k for j in range(size) for k in range(3)], np.int32)
    got = c.all_to_all(x)
    expect_equal(got, np.array([i * 1000 + rank * 100 + k for i in range(size) for k in range(3)], np.int32),
                 "all_to_all")
    send = [(rank + j) % 3 + 1 for j in range(size)]
    recv = [(i + rank) % 3 + 1 for i in range(size)]
    x = np.array([rank * 1000 + j * 100 + k for j in range(size) for k in range(send[j])], np.int32)
    got = c.all_to_allv(x, send, recv)
    expect_equal(got, np.array([i * 1000 + rank * 100 + k for i in range(size) for k in range(recv[i])], np.int32),
                 "all_to_allv")
    w = c.iall_to_allv(x, send, recv, out=np.full(sum(recv), -1, np.int32))
    w.wait()
    expect_equal(w.result, got, "iall_to_allv")


def test_send_recv(c):
    size, rank = c.size, c.rank
    nxt, prv = (rank + 1) % size, (rank + size - 1) % size
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    rb = c.irecv(b, prv, tag=2)
    ra = c.irecv(a, prv, tag=1)
    s1 = c.isend(np.arange(4, dtype=np.float32) + rank, nxt, tag=1)
    s2 = c.isend(np.arange(4, dtype=np.float32) + rank + 0.5, nxt, tag=2)
    for w in (ra, rb, s1, s2):
        w.wait()
    expect_equal(a, np.arange(4, dtype=np.float32) + prv, "recv tag 1")
    expect_equal(b, np.arange(4, dtype=np.float32) + prv + 0.5, "recv tag 2")
    assert ra.result is a and s1.result is None
    c.barrier()


def test_nonblocking(c):
    xs = [value(c.rank, 33, "sum", np.float32) + k for k in range(3)]
    works = [c.iallreduce(x) for x in xs]
    deadline = time.monotonic() + 60
    while not works[1].test():
        assert time.monotonic() < deadline, "iallreduce did not complete by testing"
    assert works[2].wait(timeout=30) and works[0].wait() is True
    for k, (w, x) in enumerate(zip(works, xs)):
        assert w.result is x and w.algorithm, "Work.result is the output"
        expect_equal(x, reference(c.size, 33, "sum", np.float32) + k * c.size, f"iallreduce {k}")
    w = c.iallgather(np.array([c.rank], np.int64))
    w.wait()
    expect_equal(w.result, np.arange(c.size, dtype=np.int64), "iallgather")
    w = c.ibarrier()
    w.wait()
    if c.size < 2:
        return
    # wait(timeout) on an operation that cannot finish yet: rank 1 sends only after a barrier.
    if c.rank == 0:
        v = np.zeros(1, np.int64)
        w = c.irecv(v, 1, tag=99)
        assert w.wait(timeout=0.05) is False and not w.test(), "irecv completed before its peer sent"
        c.barrier()
        assert w.wait(timeout=30) is True and v[0] == 4242, f"irecv after the send: {v}"
    else:
        c.barrier()
        if c.rank == 1:
            c.send(np.array([4242], np.int64), 0, tag=99)


def test_algorithms(c):
    name = c.algorithm_for("allreduce", 4096)
    assert name in c.algorithms(comm.Collective.allreduce), f"{name} not among {c.algorithms('allreduce')}"
    for algo in [name, "ring", "direct"]:
        x = value(c.rank, 19, "max", np.float64)
        w = c.iallreduce(x, "max", algorithm=algo)
        w.wait()
        assert w.algorithm == algo, f"asked for {algo}, ran {w.algorithm}"
        expect_equal(x, reference(c.size, 19, "max", np.float64), f"allreduce with {algo}")
    expect_error(comm.ErrorCode.unknown_algorithm, "no_such_algo", c.allreduce, np.ones(4), algorithm="no_such_algo")


def test_errors(c):
    x = np.ones(4, np.float32)
    e = expect_error(comm.ErrorCode.invalid_argument, "buffer protocol", c.allreduce, [1.0, 2.0])
    assert e.is_usage and isinstance(e, Exception)
    expect_error(comm.ErrorCode.unsupported, "int16", c.allreduce, np.ones(4, np.int16))
    expect_error(comm.ErrorCode.unsupported, "complex", c.allreduce, np.ones(4, np.complex64))
    expect_error(comm.ErrorCode.invalid_argument, "C-contiguous", c.allreduce, np.ones(8, np.float32)[::2])
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    expect_error(comm.ErrorCode.invalid_argument, "read-only", c.allreduce, x, out=ro)
    c.allreduce(ro, out=np.empty(4, np.float32))  # a read-only input is fine
    expect_error(comm.ErrorCode.invalid_argument, "loudest", c.allreduce, x, "loudest")
    expect_error(comm.ErrorCode.invalid_argument, "root", c.broadcast, x, c.size)
    expect_error(comm.ErrorCode.invalid_argument, "peer", c.send, x, -1)
    expect_error(comm.ErrorCode.invalid_argument, "elements", c.allreduce, x, out=np.empty(5, np.float32))
    expect_error(comm.ErrorCode.invalid_argument, "output is f64", c.allreduce, x, out=np.empty(4, np.float64))
    expect_error(comm.ErrorCode.invalid_argument, "timeout", c.allreduce, x, timeout=-1)
    assert not c.failed, "usage errors failed the communicator"
    v = np.array([c.rank + 1], np.int64)
    c.allreduce(v)
    assert v[0] == c.size * (c.size + 1) // 2, "allreduce after usage errors"


def test_config(c):
    cfg = comm.Config()
    assert (cfg.rank, cfg.world_size, cfg.transport, cfg.timeout) == (0, 1, "", 300.0), repr(cfg)
    cfg.transport_options = {"ofi.provider": "shm"}
    assert cfg.transport_option("ofi", "provider") == "shm"
    cfg.timeout = 0.25
    assert cfg.timeout == 0.25
    expect_error(comm.ErrorCode.invalid_config, "Config.timeout", setattr, cfg, "timeout", -3.0)
    expect_error(comm.ErrorCode.invalid_config, "loud", setattr, cfg, "log_level", "loud")
    cfg.algo_override = "allreduce=ring"
    with comm.Communicator(cfg) as one:
        assert (one.rank, one.size, one.transport) == (0, 1, "local")
        assert one.algorithm_for("allreduce", 64) == "ring"
        expect_equal(one.allreduce(np.arange(3, dtype=np.int32)), np.arange(3, dtype=np.int32), "one-rank allreduce")
    expect_error(comm.ErrorCode.invalid_argument, "not valid", lambda: one.rank)
    env = comm.Config.from_env()
    assert (env.rank, env.world_size) == (c.rank, c.size), repr(env)
    bad = comm.Config()
    bad.world_size, bad.rank = 2, 3
    expect_error(comm.ErrorCode.invalid_config, "rank 3", comm.Communicator, bad)
    bad.rank, bad.world_size, bad.transport = 0, 1, "no_such_transport"
    expect_error(comm.ErrorCode.unknown_transport, "no_such_transport", comm.Communicator, bad)


def test_split(c):
    sub = c.split(c.rank % 2, c.size - c.rank)
    members = list(range(c.rank % 2, c.size, 2))
    assert (sub.size, sub.rank) == (len(members), sorted(members, reverse=True).index(c.rank)), sub
    v = np.array([c.rank], np.int64)
    sub.allreduce(v)
    assert v[0] == sum(members), f"split allreduce {v}"
    sub.close()
    none = c.split(-1 if c.rank == 0 else 0)
    assert (none is None) == (c.rank == 0)
    if none is not None:
        none.close()


def test_abort_from_thread(c):
    # A communicator of this rank alone: a receive nobody satisfies, woken by
    # abort() from another thread (which can run only because recv released the GIL).
    sub = c.split(c.rank)
    timer = threading.Timer(0.3, sub.abort)
    timer.start()
    start = time.monotonic()
    e = expect_error(comm.ErrorCode.aborted, "abort", sub.recv, np.zeros(1), 0, timeout=20)
    took = time.monotonic() - start
    timer.join()
    assert took < 5, f"abort took {took:.2f} s to wake the receive"
    assert sub.failed and not e.is_usage
    expect_error(comm.ErrorCode.communicator_failed, "has failed", sub.barrier)
    sub.close()


def main():
    c = comm.Communicator.from_env()
    checks = [test_errors, test_config, test_allreduce_dtypes_ops, test_large_and_views, test_dlpack,
              test_bfloat16, test_torch, test_gathers_and_scatters, test_all_to_all, test_send_recv,
              test_nonblocking, test_algorithms, test_split, test_abort_from_thread]
    for check in checks:
        try:
            check(c)
        except Exception:
            print(f"rank {c.rank}: {check.__name__} FAILED", file=sys.stderr)
            raise
    c.barrier()
    assert not c.failed
    print(f"rank {c.rank} of {c.size}: Python suite over {c.transport} passed ({len(checks)} checks)")
    c.close()


if __name__ == "__main__":
    main()
