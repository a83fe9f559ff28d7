"""comm: collectives for LLM inference runtimes, from Python.

    import numpy as np, comm
    c = comm.Communicator.from_env()          # rank, size, store, transport from the environment
    x = np.full(1024, c.rank + 1, np.float32)
    c.allreduce(x)                            # in place, zero-copy: x[i] = 1 + 2 + ... + size

Buffers are any object with the buffer protocol or DLPack (numpy arrays, torch
tensors on the CPU, and CUDA tensors with the nccl transport), C-contiguous,
of float32, float64, float16, bfloat16 (torch, or numpy with ml_dtypes),
int8, uint8, int32 or int64. comm reads and writes their memory in place:
nothing is copied. Results go into `out=` when given; otherwise allreduce,
broadcast and reduce work in place and the gathering collectives allocate
their output like the input (numpy or torch).

Every call takes keyword options: algorithm= (e.g. "ring"; default automatic
selection), timeout= (seconds; default the config's), and for CUDA tensors
stream= (a cudaStream_t as an int; default torch's current stream). Each
collective has an `i`-prefixed twin that returns a Work at once.

Errors are comm.Error with .code (a comm.ErrorCode); usage errors (bad
arguments) are raised before anything is sent and leave the communicator
usable, runtime errors (timeout, dead peer, abort) fail it.

A Communicator is used from one thread at a time; abort() may be called from
any thread. Blocking calls release the GIL.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from . import _comm
from ._comm import Collective, Config, DataType, ErrorCode, ReduceOp, is_usage_error

__all__ = [
    "Collective",
    "Communicator",
    "Config",
    "DataType",
    "Error",
    "ErrorCode",
    "ReduceOp",
    "Work",
    "__version__",
]

__version__: str = _comm.__version__


class Error(Exception):
    """The exception of every comm failure. str(e) says what was asked, what
    was wrong (naming the argument or rank) and what to do."""

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def is_usage(self) -> bool:
        """True for bad input, reported before anything was sent."""
        return is_usage_error(self.code)


_comm._set_error_class(Error)

Op = Union[ReduceOp, str]
Array = Any  # buffer protocol or DLPack: numpy.ndarray, torch.Tensor, ...


def _op(op: Op) -> ReduceOp:
    return _comm.parse_reduce_op(op) if isinstance(op, str) else op


def _prepare(x: Array):
    """(array comm can import, explicit dtype or None). numpy's bfloat16
    (ml_dtypes) has no buffer-protocol or DLPack code, so it travels as its
    16-bit pattern with the dtype said explicitly."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and getattr(dtype, "name", None) == "bfloat16" and hasattr(x, "view"):
        return x.view("uint16"), DataType.bf16
    return x, None


def _options(x: Array, algorithm: Optional[str], timeout: Optional[float], stream: Optional[int]) -> dict:
    if stream is None and getattr(x, "is_cuda", False):
        import torch  # a CUDA tensor: run on torch's current stream

        stream = torch.cuda.current_stream(x.device).cuda_stream
    return {"algorithm": algorithm or "", "timeout": float(timeout or 0.0), "stream": int(stream or 0)}


def _empty(like: Array, shape: Sequence[int]) -> Array:
    """A new array of `shape` with like's element type and device."""
    if hasattr(like, "new_empty"):  # torch
        return like.new_empty(tuple(shape))
    if type(like).__module__ == "numpy":
        import numpy

        return numpy.empty(tuple(shape), dtype=like.dtype)
    raise Error(ErrorCode.invalid_argument,
                f"cannot allocate an output like a {type(like).__name__}: pass out=")


def _packed(counts: Sequence[int]) -> list:
    """Displacements of blocks laid out back to back."""
    displs, at = [], 0
    for n in counts:
        displs.append(at)
        at += n
    return displs


def _shape(x: Array) -> tuple:
    return tuple(getattr(x, "shape", ()))


def _scaled_first_dim(x: Array, factor: int, divide: bool) -> tuple:
    """x's shape with the first dimension multiplied (or divided) by factor."""
    shape = _shape(x) or (1,)
    first = shape[0] // factor if divide else shape[0] * factor
    if divide and shape[0] % factor:
        n = 1
        for s in shape:
            n *= s
        return (n // factor,)
    return (first,) + shape[1:]


class Work:
    """A started operation. Its buffers stay referenced until it is dropped."""

    __slots__ = ("_work", "_keep", "result")

    def __init__(self, work: _comm.Work, keep: tuple, result: Any) -> None:
        self._work = work
        self._keep = keep
        #: The operation's output buffer (None for send, barrier).
        self.result = result

    def test(self) -> bool:
        """Advances the communicator; True once complete. Raises comm.Error if it failed."""
        return self._work.test()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until complete (timeout=None: up to the operation's own
        timeout, then comm.Error). With a timeout in seconds, returns False if
        it is still running then (it keeps going)."""
        if timeout is None:
            self._work.wait()
            return True
        return self._work.wait_for(float(timeout))

    @property
    def algorithm(self) -> str:
        """The algorithm this operation runs."""
        return self._work.algorithm


class Communicator:
    """This process's member of a group of ranks.

    Communicator(config) joins the group config describes (None: from the
    environment), blocking until every rank has joined. close() (or leaving a
    `with` block) releases it; pending operations then fail with ErrorCode.aborted.
    """

    def __init__(self, config: Optional[Config] = None, *, _impl: Optional[_comm.Communicator] = None) -> None:
        if _impl is None:
            _impl = _comm.Communicator.create(config if config is not None else Config.from_env())
        self._c = _impl

    @classmethod
    def from_env(cls) -> "Communicator":
        """Joins the group the environment describes (commrun, torchrun, Slurm, Open MPI)."""
        return cls(Config.from_env())

    # ---- lifetime and introspection
    def close(self) -> None:
        """Destroys the communicator now (pending operations are cancelled)."""
        self._c.close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def rank(self) -> int:
        return self._c.rank

    @property
    def size(self) -> int:
        return self._c.size

    @property
    def transport(self) -> str:
        return self._c.transport

    @property
    def config(self) -> Config:
        return self._c.config

    @property
    def failed(self) -> bool:
        """True once a runtime error or abort() failed the communicator."""
        return self._c.failed

    def abort(self) -> None:
        """Fails every pending and later operation (ErrorCode.aborted) and wakes waiters; any thread."""
        self._c.abort()

    def split(self, color: int, key: int = 0) -> Optional["Communicator"]:
        """Collective: ranks with the same color form a new communicator ordered
        by (key, rank); color < 0 gives None."""
        sub = self._c.split(color, key)
        return None if sub is None else Communicator(_impl=sub)

    def algorithm_for(self, collective: Union[Collective, str], nbytes: int) -> str:
        """The algorithm automatic selection uses for nbytes of collective."""
        if isinstance(collective, str):
            collective = _comm.parse_collective(collective)
        return self._c.algorithm_for(collective, nbytes)

    def algorithms(self, collective: Union[Collective, str]) -> list:
        if isinstance(collective, str):
            collective = _comm.parse_collective(collective)
        return self._c.algorithms(collective)

    # ---- the collectives: i-variants return Work, the others wait for it
    def iallreduce(self, x: Array, op: Op = "sum", *, out: Optional[Array] = None, algorithm: Optional[str] = None,
                   timeout: Optional[float] = None, stream: Optional[int] = None) -> Work:
        out = x if out is None else out
        (xi, dt), (oi, _) = _prepare(x), _prepare(out)
        w = self._c.iallreduce(xi, oi, _op(op), dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def allreduce(self, x: Array, op: Op = "sum", **kw: Any) -> Array:
        """out[i] = op over ranks of x[i]; in place unless out= is given. Returns the result."""
        w = self.iallreduce(x, op, **kw)
        w.wait()
        return w.result

    def ireduce_scatter(self, x: Array, op: Op = "sum", *, out: Optional[Array] = None,
                        algorithm: Optional[str] = None, timeout: Optional[float] = None,
                        stream: Optional[int] = None) -> Work:
        if out is None:
            out = _empty(x, _scaled_first_dim(x, self.size, divide=True))
        (xi, dt), (oi, _) = _prepare(x), _prepare(out)
        w = self._c.ireduce_scatter(xi, oi, _op(op), dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def reduce_scatter(self, x: Array, op: Op = "sum", **kw: Any) -> Array:
        """x holds size blocks; rank r gets block r of the reduction (first dimension split)."""
        w = self.ireduce_scatter(x, op, **kw)
        w.wait()
        return w.result

    def iallgather(self, x: Array, *, out: Optional[Array] = None, algorithm: Optional[str] = None,
                   timeout: Optional[float] = None, stream: Optional[int] = None) -> Work:
        if out is None:
            out = _empty(x, _scaled_first_dim(x, self.size, divide=False))
        (xi, dt), (oi, _) = _prepare(x), _prepare(out)
        w = self._c.iallgather(xi, oi, dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def allgather(self, x: Array, **kw: Any) -> Array:
        """Concatenates every rank's x along the first dimension, rank order."""
        w = self.iallgather(x, **kw)
        w.wait()
        return w.result

    def ibroadcast(self, x: Array, root: int = 0, *, algorithm: Optional[str] = None,
                   timeout: Optional[float] = None, stream: Optional[int] = None) -> Work:
        xi, dt = _prepare(x)
        w = self._c.ibroadcast(xi, root, dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x,), x)

    def broadcast(self, x: Array, root: int = 0, **kw: Any) -> Array:
        """Copies root's x into every rank's x (in place)."""
        w = self.ibroadcast(x, root, **kw)
        w.wait()
        return w.result

    def ireduce(self, x: Array, op: Op = "sum", root: int = 0, *, out: Optional[Array] = None,
                algorithm: Optional[str] = None, timeout: Optional[float] = None,
                stream: Optional[int] = None) -> Work:
        if out is None and self.rank == root:
            out = x
        xi, dt = _prepare(x)
        oi = None if out is None else _prepare(out)[0]
        w = self._c.ireduce(xi, oi, _op(op), root, dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def reduce(self, x: Array, op: Op = "sum", root: int = 0, **kw: Any) -> Optional[Array]:
        """The reduction lands at root (in x unless out= is given); None elsewhere."""
        w = self.ireduce(x, op, root, **kw)
        w.wait()
        return w.result

    def iall_to_all(self, x: Array, *, out: Optional[Array] = None, algorithm: Optional[str] = None,
                    timeout: Optional[float] = None, stream: Optional[int] = None) -> Work:
        if out is None:
            out = _empty(x, _shape(x) or (1,))
        (xi, dt), (oi, _) = _prepare(x), _prepare(out)
        w = self._c.iall_to_all(xi, oi, dtype=dt, **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def all_to_all(self, x: Array, **kw: Any) -> Array:
        """x holds size equal blocks; block j goes to rank j, whose block r of out comes from rank r."""
        w = self.iall_to_all(x, **kw)
        w.wait()
        return w.result

    def iall_to_allv(self, x: Array, send_counts: Sequence[int], recv_counts: Sequence[int], *,
                     send_displs: Optional[Sequence[int]] = None, recv_displs: Optional[Sequence[int]] = None,
                     out: Optional[Array] = None, algorithm: Optional[str] = None,
                     timeout: Optional[float] = None, stream: Optional[int] = None) -> Work:
        send_counts, recv_counts = [int(n) for n in send_counts], [int(n) for n in recv_counts]
        send_displs = _packed(send_counts) if send_displs is None else [int(n) for n in send_displs]
        recv_displs = _packed(recv_counts) if recv_displs is None else [int(n) for n in recv_displs]
        if out is None:
            end = max((d + n for d, n in zip(recv_displs, recv_counts)), default=0)
            out = _empty(x, (end,))
        (xi, dt), (oi, _) = _prepare(x), _prepare(out)
        w = self._c.iall_to_allv(xi, send_counts, send_displs, oi, recv_counts, recv_displs, dtype=dt,
                                 **_options(x, algorithm, timeout, stream))
        return Work(w, (x, out), out)

    def all_to_allv(self, x: Array, send_counts: Sequence[int], recv_counts: Sequence[int], **kw: Any) -> Array:
        """Variable all-to-all in elements: send_counts[j] from x (at send_displs[j],
        default packed) to rank j; recv_counts[i] from rank i into out (at recv_displs[i])."""
        w = self.iall_to_allv(x, send_counts, recv_counts, **kw)
        w.wait()
        return w.result

    def isend(self, x: Array, peer: int, *, tag: int = 0, timeout: Optional[float] = None,
              stream: Optional[int] = None) -> Work:
        xi, dt = _prepare(x)
        w = self._c.isend(xi, peer, tag=tag, dtype=dt, **_options(x, None, timeout, stream))
        return Work(w, (x,), None)

    def send(self, x: Array, peer: int, **kw: Any) -> None:
        """Sends x to peer; messages match on (peer, tag) in posting order."""
        self.isend(x, peer, **kw).wait()

    def irecv(self, x: Array, peer: int, *, tag: int = 0, timeout: Optional[float] = None,
              stream: Optional[int] = None) -> Work:
        xi, dt = _prepare(x)
        w = self._c.irecv(xi, peer, tag=tag, dtype=dt, **_options(x, None, timeout, stream))
        return Work(w, (x,), x)

    def recv(self, x: Array, peer: int, **kw: Any) -> Array:
        """Receives exactly x's size from peer into x."""
        w = self.irecv(x, peer, **kw)
        w.wait()
        return w.result

    def ibarrier(self, *, timeout: Optional[float] = None) -> Work:
        return Work(self._c.ibarrier(timeout=float(timeout or 0.0)), (), None)

    def barrier(self, *, timeout: Optional[float] = None) -> None:
        """Returns once every rank has entered the barrier."""
        self.ibarrier(timeout=timeout).wait()

    def __repr__(self) -> str:
        try:
            return f"comm.Communicator(rank={self.rank}, size={self.size}, transport='{self.transport}')"
        except Error:
            return "comm.Communicator(closed)"
