"""The warm JAX workers behind ``mpmd_lab.probe``: start, reuse, replace, end them.

Workers are kept warm, one per (device count, platform), so JAX is imported once per
worker, not once per probe; each serves requests on a socket (length-prefixed
pickles) and climbs ``mpmd_lab.ladder`` for each (``_probe_child``). A hang is killed
at its timeout, a dead or poisoned worker is replaced by the next request.

Workers never outlive the process that started them: each child arms a parent-death
signal (Linux ``prctl``) and watches its socket for the parent's hang-up; children are
started from one long-lived thread (``_spawn``), because Linux sends the death signal
when the *thread* that forked a child ends, and a notebook runs probes from short-lived
threads. Their logs are unnamed temp files: nothing is left in the temp folder.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import pickle
import queue
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

#: Seconds a fresh worker may take to import JAX (not counted in a probe's timeout).
STARTUP_TIMEOUT = 180.0
#: Workers kept warm at once (forked from the zygote: they share most memory).
MAX_WORKERS = 3
#: Requests one worker serves before it is replaced (bounds JAX's caches).
MAX_REQUESTS = 200

_CHILD = Path(__file__).with_name("_probe_child.py")


# ---------------------------------------------------------------- wire format


class _Timeout(Exception):
    pass


class _Dead(Exception):
    pass


def _read_exact(fd: int, n: int, deadline: float) -> bytearray:
    """``n`` bytes from ``fd`` into one buffer (a large result is held once, not twice)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    poller = select.poll()  # not select(): a notebook may hold more than 1024 fds
    poller.register(fd, select.POLLIN)
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Timeout
        if not poller.poll(min(left, 1.0) * 1000):
            continue
        try:
            k = os.readv(fd, [view[got : got + (1 << 24)]])
        except ConnectionResetError as e:  # it died with our request unread in its socket
            raise _Dead from e
        if not k:
            raise _Dead
        got += k
    return buf


def _recv(fd: int, deadline: float) -> Any:
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


# ---------------------------------------------------------------- workers


def _env(platform: str) -> dict[str, str]:
    env = dict(os.environ)
    # the device count is set per worker; a count inherited from the caller would clash
    env["XLA_FLAGS"] = re.sub(
        r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", "")
    ).strip()
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


_SPAWN_QUEUE: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
    queue.SimpleQueue()
)
_SPAWNER: threading.Thread | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner_loop() -> None:
    while True:
        fn, fut = _SPAWN_QUEUE.get()
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                fut.set_exception(e)


def _spawn(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` from a thread that lives as long as this process (the main
    thread, or a daemon spawner): a child's parent-death signal then means what it says."""
    global _SPAWNER
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(*args, **kwargs)
    with _SPAWNER_LOCK:
        if _SPAWNER is None or not _SPAWNER.is_alive():
            _SPAWNER = threading.Thread(target=_spawner_loop, name="probe-spawner", daemon=True)
            _SPAWNER.start()
    fut: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
    _SPAWN_QUEUE.put((lambda: subprocess.Popen(*args, **kwargs), fut))
    return fut.result()


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the other end of ``sock`` hung up (the worker died), without reading."""
    poller = select.poll()
    poller.register(sock.fileno(), getattr(select, "POLLRDHUP", 0))
    try:
        return any(ev & (select.POLLHUP | select.POLLERR) for _, ev in poller.poll(0))
    except (OSError, ValueError):
        return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Zygote:
    """A child that has imported JAX (no backend) and forks workers on request."""

    def __init__(self, platform: str):
        self.platform = platform
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._log = tempfile.TemporaryFile(prefix="mpmd-lab-zygote-", suffix=".log")
        self.proc = _spawn(
            [sys.executable, str(_CHILD), str(theirs.fileno()), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=_env(platform),
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        self.sock = ours
        try:
            self._reply(time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Dead) as e:
            tail = self.log_tail()
            self.close()
            raise RuntimeError(f"the JAX worker did not start: {tail or type(e).__name__}") from e

    def _reply(self, deadline: float) -> dict[str, Any]:
        return _recv(self.sock.fileno(), deadline)

    def _ask(self, msg: dict[str, Any], fds: Sequence[int] = (), timeout: float = 60.0):
        data = pickle.dumps(msg)
        frame = struct.pack("<Q", len(data)) + data
        try:
            if fds:
                socket.send_fds(self.sock, [frame], list(fds))
            else:
                self.sock.sendall(frame)
            return self._reply(time.monotonic() + timeout)
        except OSError as e:
            raise _Dead from e

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 2000) -> str:
        return _tail(self._log, limit)

    def spawn(self, devices: int, log_fd: int) -> tuple[int, socket.socket]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            spec = {"devices": devices, "platform": self.platform}
            reply = self._ask({"spawn": spec}, [theirs.fileno(), log_fd])
        finally:
            theirs.close()
        return reply["pid"], ours

    def wait(self, pid: int) -> int | None:
        """Reap a worker (the zygote is its parent): its ``waitpid`` status."""
        try:
            return self._ask({"wait": pid}, timeout=30.0).get("status")
        except (_Timeout, _Dead):
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        self._log.close()


def _tail(log: Any, limit: int) -> str:
    """The last ``limit`` bytes of a log (an unnamed temp file) as text ("" once closed)."""
    try:
        fd = log.fileno()
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return ""


_ZYGOTES: dict[str, _Zygote] = {}


def _zygote(platform: str) -> _Zygote:
    z = _ZYGOTES.get(platform)
    if z is None or not z.alive():
        if z is not None:
            z.close()
        z = _ZYGOTES[platform] = _Zygote(platform)
    return z


def _use_zygote(platform: str) -> bool:
    """Fork workers from a zygote (CPU), or start each as a process (a GPU platform,
    or ``MPMD_LAB_FORK=0``, or not Linux): a process that may touch CUDA is never forked."""
    fork_ok = sys.platform.startswith("linux") and os.environ.get("MPMD_LAB_FORK", "1") != "0"
    return platform == "cpu" and fork_ok


class Worker:
    """One JAX process for one (device count, platform): forked from the zygote on
    the CPU, a process of its own otherwise."""

    def __init__(self, devices: int, platform: str = "cpu"):
        self.devices = devices
        self.platform = platform
        self.requests = 0
        self.cancelled = False  # ``cancel`` killed it mid-request
        self.last_stage: str | None = None
        self.status: int | None = None
        self._log = tempfile.TemporaryFile(prefix="mpmd-lab-worker-", suffix=".log")
        self.zygote: _Zygote | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if _use_zygote(platform):
            self.zygote = _zygote(platform)
            try:
                self.pid, self.sock = self.zygote.spawn(devices, self._log.fileno())
            except (_Timeout, _Dead) as e:
                tail = self.zygote.log_tail()
                self.zygote.close()
                raise RuntimeError(
                    f"the JAX worker did not start: {tail or type(e).__name__}"
                ) from e
        else:
            self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            fd, log_fd = theirs.fileno(), self._log.fileno()
            self.proc = _spawn(
                [
                    sys.executable,
                    str(_CHILD),
                    "--direct",
                    str(fd),
                    str(devices),
                    platform,
                    str(log_fd),
                    str(os.getpid()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_env(platform),
                pass_fds=(fd, log_fd),
                start_new_session=True,
            )
            theirs.close()
            self.pid = self.proc.pid
        self._dead = False
        try:
            msg = _recv(self.sock.fileno(), time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Dead) as e:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"the JAX worker did not start: {tail or type(e).__name__}") from e
        self.info: dict[str, Any] = msg.get("ready", {})

    def alive(self) -> bool:
        """Not closed, and its socket not hung up (a worker killed while idle)."""
        return not self._dead and not _peer_gone(self.sock)

    def stderr_tail(self, limit: int = 2000) -> str:
        return _tail(self._log, limit)

    def request(
        self, req: dict[str, Any], timeout: float, on_stage: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send one request; the child's result dict. Raises _Timeout or _Dead."""
        self.requests += 1
        data = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.sendall(struct.pack("<Q", len(data)) + data)
        except OSError as e:
            raise _Dead from e
        deadline = time.monotonic() + timeout
        fd = self.sock.fileno()
        while True:
            try:
                msg = _recv(fd, deadline)
            except (EOFError, pickle.UnpicklingError, struct.error) as e:
                raise _Dead from e
            if "progress" in msg:
                self.last_stage = msg["progress"]
                if on_stage:
                    on_stage(msg["progress"])
                continue
            return msg["result"]

    def kill(self) -> None:
        """Kill the worker's process group now (``close`` reaps it)."""
        _kill_group(self.pid)

    def close(self) -> None:
        """Kill the worker (its whole process group) and reap it."""
        if not self._dead:
            self._dead = True
            _kill_group(self.pid)
            if self.zygote is not None:
                self.status = self.zygote.wait(self.pid)
            elif self.proc is not None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                rc = self.proc.returncode
                # a Popen return code as a waitpid status, for exit_reason
                self.status = None if rc is None else (-rc if rc < 0 else rc << 8)
        self.sock.close()
        self._log.close()

    def exit_reason(self) -> str:
        """How a dead worker ended (after ``close``), e.g. ``signal SIGSEGV``."""
        st = self.status
        if st is None:
            return "unknown cause"
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            try:
                return f"signal {signal.Signals(sig).name}"
            except ValueError:
                return f"signal {sig}"
        return f"exit status {os.WEXITSTATUS(st)}"


_LOCK = threading.RLock()
_POOL: dict[tuple[int, str], Worker] = {}


class Busy(Protocol):
    """What serves the request in progress: a worker, or the processes of a
    multi-process run (``mpmd_lab.multihost``)."""

    cancelled: bool

    def kill(self) -> None: ...


#: what serves a request now (``cancel`` stops it); its own lock, not _LOCK,
#: which the running request holds
_BUSY: list[Busy] = []
_BUSY_LOCK = threading.Lock()
#: set by ``cancel``: the run in progress (or starting) stops, cleared by the next run
CANCELLED = threading.Event()


def busy(w: Busy | None) -> None:
    """Mark ``w`` as serving the request in progress (None: done)."""
    with _BUSY_LOCK:
        _BUSY[:] = [w] if w is not None else []


def cancel() -> bool:
    """Stop the run in progress: its worker is killed (the next run gets a fresh one).
    True when a run was going (or starting), False when there was none."""
    CANCELLED.set()
    with _BUSY_LOCK:
        w = _BUSY[0] if _BUSY else None
    if w is None:
        return _pool_in_use()
    w.cancelled = True
    w.kill()
    return True


def _pool_in_use() -> bool:
    """Whether a probe holds the pool (a worker starting for it)."""
    if _LOCK.acquire(blocking=False):
        _LOCK.release()
        return False
    return True


def _worker(devices: int, platform: str) -> Worker:
    key = (devices, platform)
    w = _POOL.pop(key, None)
    if w is not None and (not w.alive() or w.requests >= MAX_REQUESTS):
        w.close()
        w = None
    if w is None:
        while len(_POOL) >= MAX_WORKERS:
            _POOL.pop(next(iter(_POOL))).close()
        w = Worker(devices, platform)
    _POOL[key] = w  # most recently used last
    return w


def _discard(w: Worker) -> None:
    if _POOL.get((w.devices, w.platform)) is w:
        del _POOL[(w.devices, w.platform)]
    w.close()


def shutdown() -> None:
    """Stop every warm worker and the zygotes."""
    with _LOCK:
        while _POOL:
            _POOL.popitem()[1].close()
        while _ZYGOTES:
            _ZYGOTES.popitem()[1].close()


atexit.register(shutdown)


def worker_info(devices: int = 1, platform: str = "cpu") -> dict[str, Any]:
    """What a worker found at start: ``platform``, ``devices``, ``compute_capability``, ``jax``."""
    with _LOCK:
        return dict(_worker(devices, platform).info)
