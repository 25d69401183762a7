"""The Spark sessions the tests share, and a real Spark standalone cluster for some of
them.

A Python process holds one SparkContext at a time, so :class:`Sessions` holds one
session and switches when a test asks for another kind (the conftest orders the tests
so that each kind starts once): ``local`` (``local[2]``, executors inside the driver's
JVM), ``cluster`` (:class:`Cluster`: a master and two workers started from the
installed pyspark's ``spark-class`` on 127.0.0.1, each worker running its own executor
JVM and Python workers, which get floodmark the way docs/spark.md ("Running on a
cluster") says: a venv with the floodmark wheel, packed by ``venv-pack`` and shipped
with ``spark.archives``), and ``bare`` (the same cluster, its executors running a
Python that has floodmark's dependencies but not floodmark).

The cluster, the environments and the workers' directories live in one temporary
folder, removed at the end. Every process the cluster starts (master, workers, the
executors they launch and those executors' Python workers) belongs to a session
(``setsid``) led by a master or worker process: :meth:`Cluster.stop` stops them,
kills what is left, and reports any process still in those sessions.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

#: The local session's settings (as the suite always had them); the cluster sessions
#: use the same shuffle and default widths, so only where the work runs differs.
LOCAL_CONF = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"}
WORKERS, WORKER_CORES, WORKER_MEMORY, EXECUTOR_MEMORY = 2, 1, "1g", "768m"
#: Where the packed environment is unpacked on each executor (``#environment``).
ENV_PYTHON = "./environment/bin/python"
START_TIMEOUT_S = 180


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def java_home() -> str:
    """``JAVA_HOME``, else Java 17 as ``local_session`` picks it."""
    from floodmark.spark.session import _java17_home

    home = os.environ.get("JAVA_HOME") or _java17_home()
    if not home:
        raise RuntimeError("no Java 17 found: set JAVA_HOME")
    return home


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return str(_find_spark_home())


def session_members(leaders: set[int]) -> list[str]:
    """``pid command`` of every live process in the sessions led by ``leaders``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) in leaders and fields[0] != "Z":  # session id; not a zombie
            found.append(f"{stat.parent.name} {text[text.index('(') + 1 : text.rindex(')')]}")
    return found


def listening(pids: set[int]) -> list[tuple[int, str]]:
    """``(pid, "address:port")`` of every TCP socket the processes ``pids`` listen on."""
    inodes = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = pid
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    address, port = cols[1].split(":")
                    raw = bytes.fromhex(address)
                    # /proc shows each 32-bit word in host (little-endian) order
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                    ip = socket.inet_ntop(
                        socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words
                    )
                    found.append((inodes[cols[9]], f"{ip.removeprefix('::ffff:')}:{int(port, 16)}"))
    return found


@dataclass
class Cluster:
    """A Spark standalone master and :data:`WORKERS` workers on 127.0.0.1."""

    root: Path
    url: str = ""
    web: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> Cluster:
        home = spark_home()
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
        }
        env.update(
            SPARK_HOME=home,
            JAVA_HOME=java_home(),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_LOCAL_DIRS=str(self.root / "scratch"),  # the executors' shuffle files
            # no REST submission server (a fixed port, 6066)
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        )
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        port, web = free_port(), free_port()
        self.web = f"http://127.0.0.1:{web}"
        self.launch(
            home,
            env,
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"],
            ["--port", str(port), "--webui-port", str(web)],
        )
        for i in range(WORKERS):
            work = self.root / f"worker-{i}"
            work.mkdir()
            self.launch(
                home,
                env,
                f"worker-{i}",
                ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}"],
                ["--host", "127.0.0.1", "--port", str(free_port())],
                ["--webui-port", str(free_port()), "--cores", str(WORKER_CORES)],
                ["--memory", WORKER_MEMORY, "--work-dir", str(work)],
            )
        self.wait_for_workers()
        return self

    def launch(self, home: str, env: dict[str, str], name: str, *args: list[str]) -> None:
        log = (self.root / "logs" / f"{name}.out").open("wb")
        command = [f"{home}/bin/spark-class", *[a for part in args for a in part]]
        # spark-class execs the JVM: the pid is the JVM's, leading its own session.
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)

    def wait_for_workers(self) -> None:
        """Until the master's web UI lists every worker ALIVE; its ``url`` is the
        master URL."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            try:
                with urllib.request.urlopen(f"{self.web}/json/", timeout=5) as response:
                    state = json.load(response)
                alive = [w for w in state["workers"] if w["state"] == "ALIVE"]
                if len(alive) == WORKERS:
                    self.url = state["url"]
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the Spark cluster did not start:\n{self.logs()}")

    def logs(self, lines: int = 15) -> str:
        out = []
        for log in sorted((self.root / "logs").glob("*.out")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self, grace_s: float = 60) -> list[str]:
        """Stops the workers (which stop their executors), then the master; kills what
        is left after ``grace_s``. Returns the processes that were still there."""
        for proc in reversed(self.procs):  # workers first
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        leaders = {p.pid for p in self.procs}
        deadline = time.monotonic() + grace_s
        while (left := session_members(leaders)) and time.monotonic() < deadline:
            time.sleep(0.5)
        if left:
            self.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        return left

    def pids(self) -> set[int]:
        """Every live process of the cluster (master, workers, executors, Python)."""
        return {int(line.split()[0]) for line in session_members({p.pid for p in self.procs})}

    def kill(self) -> None:
        """SIGKILL to every process of the cluster's sessions (also at exit, in case the
        tests' teardown never ran)."""
        leaders = {p.pid for p in self.procs}
        for line in session_members(leaders):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)


@dataclass
class Environments:
    """The executors' Pythons: ``archive`` a venv-pack archive of a venv holding the
    floodmark wheel, ``bare_python`` a venv with floodmark's dependencies only."""

    archive: Path
    bare_python: Path


def build_environments(root: Path) -> Environments:
    """The shipping path docs/spark.md documents: build the wheel, install it into a
    fresh venv (with the driver's pyarrow and numpy versions), pack that with
    venv-pack. Then floodmark is uninstalled from the venv, which leaves the bare one."""
    dist, venv = root / "dist", root / "floodmark-env"
    run([sys.executable, "-m", "maturin", "build", "--release", "--quiet", "--out", str(dist)])
    (wheel,) = dist.glob("floodmark-*.whl")
    base = Path(getattr(sys, "_base_executable", sys.executable))
    run([str(base), "-m", "venv", str(venv)])
    pins = [f"{name}=={version(name)}" for name in ("pyarrow", "numpy")]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*pip, "install", str(wheel), *pins])
    archive = root / "floodmark-env.tar.gz"
    run([venv_pack(), "--prefix", str(venv), "--output", str(archive), "--quiet"])
    run([*pip, "uninstall", "--yes", "floodmark"])
    return Environments(archive=archive, bare_python=venv / "bin" / "python")


def venv_pack() -> str:
    found = Path(sys.executable).with_name("venv-pack")
    return str(found) if found.exists() else shutil.which("venv-pack") or "venv-pack"


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class Sessions:
    """One Spark session at a time, of the kind a test asks for (see the module)."""

    kind: str | None = None
    session: Any = None
    root: Path | None = None
    cluster: Cluster | None = None
    envs: Environments | None = None
    #: Seconds spent building the environments, starting the cluster, and with each
    #: kind of session (from its start to its stop: its tests), for the run's summary.
    timings: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    failed: Exception | None = None

    def get(self, kind: str) -> Any:
        if kind == self.kind:
            return self.session
        self.stop_session()
        if kind == "local":
            from floodmark.spark import local_session

            self.started = time.monotonic()
            self.session = local_session(master="local[2]", conf=LOCAL_CONF)
        else:
            self.session = self.cluster_session(kind)
        self.kind = kind
        return self.session

    def set_up(self) -> tuple[Cluster, Environments]:
        """The environments and the running cluster, made on the first call. A failure
        is raised again at once to every later test, not retried by each."""
        if self.failed is not None:
            raise RuntimeError(f"the cluster could not be set up: {self.failed}")
        try:
            if self.root is None:
                self.root = Path(tempfile.mkdtemp(prefix="floodmark-cluster-"))
            if self.envs is None:
                started = time.monotonic()
                self.envs = build_environments(self.root)
                self.timings["environments"] = time.monotonic() - started
            if self.cluster is None:
                started = time.monotonic()
                self.cluster = Cluster(self.root)
                atexit.register(self.cluster.kill)
                self.cluster.start()
                self.timings["cluster start"] = time.monotonic() - started
        except Exception as err:
            self.failed = err
            raise
        return self.cluster, self.envs

    def cluster_session(self, kind: str) -> Any:
        from floodmark.spark import local_session

        cluster, envs = self.set_up()
        conf = {
            **LOCAL_CONF,
            "spark.executor.cores": str(WORKER_CORES),
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.cores.max": str(WORKERS * WORKER_CORES),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }
        if kind == "cluster":
            # docs/spark.md: the packed environment, unpacked on each executor as
            # ./environment, and its Python for the executors.
            conf["spark.archives"] = f"{envs.archive}#environment"
            python = ENV_PYTHON
        else:
            python = str(envs.bare_python)
        # PySpark takes the executors' Python from PYSPARK_PYTHON when the context
        # starts (the spark.pyspark.python setting is read by spark-submit only).
        self.started = time.monotonic()
        saved = os.environ.get("PYSPARK_PYTHON")
        os.environ["PYSPARK_PYTHON"] = python
        try:
            session = local_session(master=cluster.url, app_name=f"floodmark-{kind}", conf=conf)
        finally:
            if saved is None:
                del os.environ["PYSPARK_PYTHON"]
            else:
                os.environ["PYSPARK_PYTHON"] = saved
        wait_for_executors(session, WORKERS)
        return session

    def stop_session(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.timings[f"{self.kind} tests"] = time.monotonic() - self.started
        self.session, self.kind = None, None

    def close(self) -> list[str]:
        """Stops the session and the cluster, removes the temporary folder; returns the
        cluster's processes that did not stop by themselves (killed since)."""
        self.stop_session()
        left: list[str] = []
        if self.cluster is not None:
            started = time.monotonic()
            left = self.cluster.stop()
            atexit.unregister(self.cluster.kill)
            self.timings["cluster stop"] = time.monotonic() - started
        if self.root is not None:
            started = time.monotonic()
            shutil.rmtree(self.root, ignore_errors=True)
            self.timings["cleanup"] = time.monotonic() - started
        return left


def wait_for_executors(spark: Any, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Until ``count`` executors (besides the driver) have registered."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while len(tracker.getExecutorInfos()) < count + 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} executors did not register in {timeout_s} s")
        time.sleep(0.2)
