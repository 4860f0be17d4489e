"""``mlbridge train inliner``, ``phase-order`` and ``regalloc`` on a real two-node Ray cluster.

The cluster is two ``ray start --block`` processes, each in its own session (process
group) with its own temporary folder and free ports: a head labelled with the custom
resource ``node_head`` and a worker labelled ``node_worker``, one CPU each, so the job's
two actors land one per node. The job is the command line itself (``python -m mlbridge
train inliner --ray-address ...``) on a corpus of three small modules, two iterations of
one pair. The tests show that rollouts ran on both nodes, that a job whose worker node is
SIGKILLed mid-job still ends with a model and names the lost node, that a resumed job
reaches exactly the parameters of an uninterrupted one, and that a node without LLVM 22's
tools stops the job with its node named. The phase-ordering trainer's job (two iterations
of four episodes) shows its episodes ran on both nodes, that it reaches the same policy
without Ray, and that a job resumed on the cluster from a checkpoint written without Ray
reaches the policy of the uninterrupted one; the register-allocation trainer's job (two
modules, both sampled, two iterations of two rollouts) shows the same three things. Every
Ray process is killed by its process group at the end, and none may be left.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, VECTORS, compile_to_bitcode

RAY = Path(sys.executable).with_name("ray")
SOURCES = [
    VECTORS / "llvm22" / "inline-sample.c",
    REPO / "test" / "lit" / "Inputs" / "inline.c",
    REPO / "test" / "lit" / "Inputs" / "phase_order.c",
]
#: Two iterations of one pair on two of the three modules: 21 compilations in all.
#: A wide sigma, so that the perturbed policies decide differently and every step moves.
JOB = ["--min-calls", "0", "--pairs", "1", "--modules-per-iteration", "2", "--seed", "3",
       "--sigma", "0.5", "--learning-rate", "0.5"]  # fmt: skip
#: The phase-ordering job: a warm start on 2 modules, then iterations of 2 modules x 2
#: episodes of at most 5 steps, and the validation on 2 modules; no held-out evaluation.
PHASE_ORDER_JOB = ["--teacher", "0-3", "--bc-modules", "2", "--bc-epochs", "20",
                   "--modules-per-iteration", "2", "--episodes-per-module", "2",
                   "--validation-modules", "2", "--max-steps", "5", "--seed", "5",
                   "--no-eval"]  # fmt: skip
STARTED = "Ray runtime started"
NODE_START_TIMEOUT_S = 90


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports nobody listens on now (bound to port 0, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def session_members(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``: a node and all it started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class Node:
    label: str
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the node: ``ray start`` and everything it started.

        It runs in a session of its own: its process group first, then any process of its
        session that made a group of its own.
        """
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in session_members(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)


class Cluster:
    """A head and (re)startable worker nodes, each ``ray start --block`` in its own group."""

    def __init__(self) -> None:
        # Short: Ray's Unix sockets live under it (at most 107 bytes a path).
        self.root = Path(tempfile.mkdtemp(prefix="mlbr-ray-", dir="/tmp"))
        self.port = free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[Node] = []
        # Ray's token authentication with a token of the cluster's own, given to its nodes
        # and jobs: whatever ~/.ray/auth_token holds (a local `ray.init()` writes one,
        # and `ray start` would then turn token mode on for the head alone).
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.env = {
            **os.environ,
            # The workers import this checkout's mlbridge, as the job does.
            "PYTHONPATH": str(REPO),
            "RAY_USAGE_STATS_ENABLED": "0",
            **self.auth,
            # A dead node is noticed in about 3 s, not Ray's default 30.
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_timeout_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
            # The actors' private folders (tempfile) land here, removed with the cluster.
            "TMPDIR": str(self.root / "tmp"),
        }
        (self.root / "tmp").mkdir()

    def start_node(self, label: str, *, head: bool, env: dict[str, str] | None = None) -> Node:
        name = f"n{len(self.nodes)}"
        ports = free_ports(8 + 16)
        argv = [
            str(RAY), "start", "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            f"--resources={json.dumps({label: 1})}",
            "--disable-usage-stats",
            f"--temp-dir={self.root / name}",
            "--object-store-memory=100000000",
            f"--node-manager-port={ports[0]}",
            f"--object-manager-port={ports[1]}",
            f"--dashboard-agent-listen-port={ports[2]}",
            f"--dashboard-agent-grpc-port={ports[3]}",
            f"--runtime-env-agent-port={ports[4]}",
            f"--metrics-export-port={ports[5]}",
            f"--worker-port-list={','.join(map(str, ports[8:]))}",
        ]  # fmt: skip
        if head:
            argv += [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=false",
                f"--ray-client-server-port={ports[6]}",
            ]
        else:
            argv += [f"--address={self.address}"]
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.env, **(env or {})},
                start_new_session=True,  # its own process group: killed as one
            )
        node = Node(label, proc, log)
        self.nodes.append(node)
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while STARTED not in log.read_text(errors="replace"):
            if not node.alive() or time.monotonic() > deadline:
                node.kill()
                pytest.fail(f"ray start ({label}) did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        return node

    def worker(self) -> Node | None:
        live = [n for n in self.nodes if n.label == "node_worker" and n.alive()]
        return live[-1] if live else None

    def ensure_worker(self) -> Node:
        return self.worker() or self.start_node("node_worker", head=False)

    def processes(self) -> list[int]:
        """Live processes of the cluster's nodes (each node is a session)."""
        return [pid for node in self.nodes for pid in session_members(node.proc.pid)]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        deadline = time.monotonic() + 20
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.processes()
        shutil.rmtree(self.root, ignore_errors=True)
        assert not left, f"Ray processes left behind: {left}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        c.start_node("node_head", head=True)
        c.start_node("node_worker", head=False)
        yield c
    finally:
        c.stop()


def make_corpus(root: Path, sources: list[Path]) -> Path:
    """A corpus in ``root`` of ``sources``, all training modules (manifest format 1)."""
    from mlbridge.ir import read_module

    (root / "bc").mkdir()
    modules = []
    for source in sources:
        bitcode = compile_to_bitcode(source, root / "bc" / f"{source.stem}.bc")
        modules.append(
            {
                "id": f"tiny/{source.name}",
                "project": "tiny",
                "split": "train",
                "source": str(source),
                "bitcode": f"bc/{bitcode.name}",
                "cwd": str(source.parent),
                "command": ["clang-22", "-O2", "-Xclang", "-disable-llvm-passes", source.name],
                "status": "ok",
                "error": "",
                "stats": read_module(bitcode).to_dict(),
            }
        )
    manifest = {
        "format": 1,
        "split": {"train": ["tiny"], "heldout": []},
        "projects": [{"name": "tiny", "split": "train"}],
        "modules": modules,
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of three small modules."""
    return make_corpus(tmp_path_factory.mktemp("tiny-corpus"), SOURCES)


def train(
    cluster: Cluster, corpus: Path, out: Path, *args: str, timeout: float = 300
) -> tuple[int, str]:
    """``python -m mlbridge train inliner`` on ``corpus`` into ``out``, joining ``cluster``:
    (status, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", "inliner", "--corpus", str(corpus),
         *JOB, "--ray-address", cluster.address, *args, "-o", str(out)],
        capture_output=True, text=True, timeout=timeout, env=job_env(cluster), cwd=out.parent,
    )  # fmt: skip
    assert proc.stdout == "", f"the command wrote to stdout: {proc.stdout!r}"
    return proc.returncode, proc.stderr


def job_env(cluster: Cluster | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MLBRIDGE_PROGRESS": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        **(cluster.auth if cluster is not None else {}),
    }


def checkpoint(folder: Path, iteration: int) -> dict:
    """The trainer's state in ``folder``'s checkpoint of ``iteration``."""
    doc = json.loads((folder / f"iteration-{iteration:06d}.json").read_text())
    assert doc["iteration"] == iteration
    return doc["state"]


def node_ids(log: str) -> dict[str, str]:
    """Label -> (node id, IP), from the job's line naming where its workers run."""
    line = next(line for line in log.splitlines() if " workers on " in line)
    found = re.findall(r"node ([0-9a-f]{56}) \(([0-9.]+), (node_\w+)\)", line)
    return {label: (node_id, ip) for node_id, ip, label in found}


def scalars(event_dir: Path) -> dict[str, dict[int, float]]:
    """Tag -> step -> value, from every TensorBoard event file in ``event_dir``.

    Reads the TFRecord framing (length, its CRC, the record, its CRC) and the ``Event``
    protocol buffers with tensorboardX's own message classes.
    """
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, dict[int, float]] = {}
    files = sorted(event_dir.glob("events.out.tfevents.*"))
    assert files, f"no event file in {event_dir}"
    for path in files:
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            record = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            event = Event.FromString(record)
            for value in event.summary.value:
                out.setdefault(value.tag, {})[event.step] = value.simple_value
    return out


@pytest.fixture(scope="module")
def two_node_run(cluster: Cluster, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """The uninterrupted two-iteration job on both nodes: (policy JSON, stderr, folder)."""
    cluster.ensure_worker()
    folder = tmp_path_factory.mktemp("two-node-run")
    status, log = train(cluster, corpus, folder / "p.json", "--workers", "2", "--iterations", "2")
    assert status == 0, log
    return json.loads((folder / "p.json").read_text()), log, folder


@pytest.mark.parametrize(
    ("problem", "rollouts"),
    [("inliner", "compilations"), ("phase-order", "episodes"), ("regalloc", "compilations")],
)
def test_help_explains_the_options(problem: str, rollouts: str):
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", problem, "--help"],
        capture_output=True, text=True, timeout=60, env=job_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for option, words in [
        ("--ray-address ADDR", "join this Ray cluster"),
        ("--workers N, --jobs N", f"{rollouts} at once"),
        ("--no-ray", "without Ray"),
        ("--checkpoint-dir DIR", "where checkpoints go"),
        ("--checkpoint-every N", "every N iterations"),
        ("--resume", "latest checkpoint"),
        ("--tensorboard-dir DIR", "TensorBoard event files"),
        ("--curve FILE", "PNG learning curve"),
    ]:
        assert f"{option} {words}" in text or (option in text and words in text), option


def test_a_job_runs_rollouts_on_both_nodes_and_writes_its_metrics(two_node_run):
    policy, log, folder = two_node_run
    meta = policy["metadata"]
    pool = meta["pool"]
    assert pool["backend"] == "ray" and pool["workers"] == 2
    by_label = {tuple(n["labels"]): n for n in pool["rollouts_by_node"]}
    assert set(by_label) == {("node_head",), ("node_worker",)}, pool
    assert all(n["rollouts"] > 0 for n in by_label.values()), pool
    # Every compilation is counted once: 3 stock, 1 feature list, 3 start, 2 x (4 + 3).
    assert sum(n["rollouts"] for n in by_label.values()) == meta["rollouts"] == 21
    assert pool["retried_rollouts"] == 0 and pool["lost_nodes"] == []
    ids = node_ids(log)
    assert set(ids) == {"node_head", "node_worker"}, log
    assert {label: (n["node_id"], n["ip"]) for (label,), n in by_label.items()} == ids
    assert "2 workers on 2 node(s)" in log
    assert [p.name for p in sorted((folder / "p.checkpoints").iterdir())] == [
        "iteration-000001.json",
        "iteration-000002.json",
    ]
    tags = scalars(folder / "p.tensorboard")
    assert sorted(tags["reward/best_saving_pct"]) == [0, 1, 2]
    assert sorted(tags["reward/perturbed_mean_saving_pct"]) == [1, 2]
    assert tags["reward/best_saving_pct"][2] == pytest.approx(
        meta["mean_saving_vs_stock_Oz"] * 100, abs=1e-4
    )
    walls = [tags["time/wall_s"][s] for s in (0, 1, 2)]
    assert 0 < walls[0] < walls[1] < walls[2] <= meta["wall_time_s"] + 0.001
    png = (folder / "p.curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_a_resumed_job_reaches_the_parameters_of_an_uninterrupted_one(
    two_node_run, cluster: Cluster, corpus: Path, tmp_path: Path
):
    whole, _, whole_folder = two_node_run
    cluster.ensure_worker()
    out = tmp_path / "p.json"
    where = ["--workers", "2"]
    status, log = train(cluster, corpus, out, *where, "--iterations", "1")
    assert status == 0, log
    status, log = train(cluster, corpus, out, *where, "--iterations", "2", "--resume")
    assert status == 0, log
    assert re.search(r"resuming from .*iteration-000001\.json \(iteration 1/2", log), log
    assert "measuring stock -Oz" not in log  # the baselines came from the checkpoint
    resumed = json.loads(out.read_text())
    assert resumed["metadata"]["resumed_from_iteration"] == 1
    # The returned policy, its score, and the state after iteration 2 (the iterate's
    # parameters and the random generator) are the uninterrupted run's, to the bit.
    assert resumed["weights"] == whole["weights"] and resumed["bias"] == whole["bias"]
    assert (
        resumed["metadata"]["mean_saving_vs_stock_Oz"]
        == whole["metadata"]["mean_saving_vs_stock_Oz"]
    )
    mine = checkpoint(tmp_path / "p.checkpoints", 2)
    theirs = checkpoint(whole_folder / "p.checkpoints", 2)
    assert mine["theta"] == theirs["theta"] and mine["rng"] == theirs["rng"]
    # Iteration 2 moved the parameters, so equal parameters say something.
    assert theirs["theta"] != checkpoint(whole_folder / "p.checkpoints", 1)["theta"]
    # The curve's history spans both segments.
    tags = scalars(tmp_path / "p.tensorboard")
    assert sorted(tags["reward/best_saving_pct"]) == [0, 1, 2]


def test_killing_the_worker_node_mid_job_still_ends_with_a_model(
    cluster: Cluster, corpus: Path, tmp_path: Path
):
    worker = cluster.ensure_worker()
    out = tmp_path / "p.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlbridge", "train", "inliner", "--corpus", str(corpus), *JOB,
         "--iterations", "2", "--ray-address", cluster.address, "--workers", "2",
         "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job_env(cluster),
        cwd=tmp_path,
    )  # fmt: skip
    lines = []
    killed_at = None
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            # The rollouts of iteration 1 go out right after this line: kill into them.
            if killed_at is None and line.startswith("mlbridge train: start: "):
                worker.kill()
                killed_at = len(lines)
        status = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = "".join(lines)
    assert killed_at is not None, log
    assert status == 0, log
    policy = json.loads(out.read_text())
    ids = node_ids(log)
    lost = [line for line in lines[killed_at:] if "lost the Ray worker" in line]
    assert len(lost) == 1, log
    worker_id, worker_ip = ids["node_worker"]
    match = re.search(
        rf"lost the Ray worker on node {worker_id} \({re.escape(worker_ip)}, node_worker\) "
        r"\(\w+Error: .*\); retried (\d+) rollouts? on the other workers"
        r"(?: \(and (\d+) queued behind (?:it|them)\))?, 1 left",
        lost[0],
    )
    assert match, lost[0]
    pool = policy["metadata"]["pool"]
    assert pool["lost_nodes"] == [
        {"node_id": worker_id, "ip": worker_ip, "labels": ["node_worker"]}
    ]
    assert pool["retried_rollouts"] == int(match.group(1)) >= 1
    assert pool["requeued_rollouts"] == int(match.group(2) or 0)
    # Every compilation still ran once to completion, the ones after the loss on the head.
    assert sum(n["rollouts"] for n in pool["rollouts_by_node"]) == 21
    assert re.search(r"iteration 2/2: saving", log)


def test_a_node_without_llvm_tools_stops_the_job_naming_the_node(
    cluster: Cluster, corpus: Path, tmp_path: Path
):
    old = cluster.worker()
    if old is not None:
        old.kill()
    empty = tmp_path / "no-llvm"
    empty.mkdir()
    broken = cluster.start_node(
        "node_worker", head=False, env={"MLBRIDGE_LLVM_TOOLS_DIR": str(empty)}
    )
    try:
        status, log = train(
            cluster, corpus, tmp_path / "p.json", "--workers", "2", "--iterations", "1"
        )
    finally:
        broken.kill()
    assert status == 1, log
    error = next(line for line in log.splitlines() if "cannot run rollouts" in line)
    assert re.search(
        r"the Ray worker on node [0-9a-f]{56} \([0-9.]+, node_worker\) cannot run "
        rf"rollouts: TrainingError: LLVM's opt is not in {re.escape(str(empty))}",
        error,
    ), error
    assert "mlbridge doctor" in error and "LLVM 22" in error
    assert not (tmp_path / "p.json").exists()


#: A driver of its own: a pool whose rollouts kill their worker process every time.
CRASHING_POOL = r"""
import os, sys
from mlbridge.training.pool import RolloutPoolError
from mlbridge.training.ray_pool import RayRolloutPool, ray_session

def crash(context, item):
    os._exit(3)  # the worker process dies mid-rollout, as in a segfault or an OOM kill

with ray_session(sys.argv[1]):
    for name, options, items in [
        ("no-replacements", {"max_replacements": 0}, [1, 2, 3]),
        ("bounded-retries", {"max_retries": 1, "max_replacements": 8}, [1]),
    ]:
        lines = []
        with RayRolloutPool(2, log=lines.append, **options) as pool:
            try:
                pool.map(crash, items)
                print(name, "ERROR: no error", flush=True)
            except RolloutPoolError as e:
                print(name, "RolloutPoolError:", e, flush=True)
            print(name, "retried", pool.summary()["retried_rollouts"], flush=True)
        for line in lines:
            print(name, "log:", line, flush=True)
"""


def test_a_rollout_that_kills_its_workers_is_retried_a_bounded_number_of_times(
    cluster: Cluster, tmp_path: Path
):
    cluster.ensure_worker()
    script = tmp_path / "crash.py"
    script.write_text(CRASHING_POOL)
    proc = subprocess.run(
        [sys.executable, str(script), cluster.address],
        capture_output=True, text=True, timeout=300, env=job_env(cluster),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # Without replacements: both workers die on their first rollouts, then nothing is left.
    assert re.search(
        r"^no-replacements RolloutPoolError: every Ray worker was lost \(node [0-9a-f]{56} .*\) "
        r"and no replacement can be started",
        out,
        re.M,
    ), out
    assert "no-replacements retried 2" in out
    assert len(re.findall(r"^no-replacements log: lost the Ray worker on node ", out, re.M)) == 2
    # With replacements: the one rollout is moved once, then given up.
    assert re.search(
        r"^bounded-retries RolloutPoolError: item 0 lost its worker 2 times \(last on node "
        r"[0-9a-f]{56} \(.*\): ActorDiedError: .*\); giving up",
        out,
        re.M,
    ), out
    assert "bounded-retries retried 1" in out


#: A driver of its own: the niceness of a local instance's workers, above its own.
NICENESS = r"""
import os
from mlbridge.training.ray_pool import RayRolloutPool, ray_session

def niceness(context, item):
    return os.nice(0)

with ray_session(num_cpus=1):
    with RayRolloutPool(1) as pool:
        print("worker niceness", pool.map(niceness, [0])[0].value - os.nice(0), flush=True)
"""


@pytest.mark.parametrize(("preset", "expected"), [(None, 0), ("7", 7)])
def test_a_local_instance_runs_its_workers_at_the_jobs_priority_unless_told(
    tmp_path: Path, preset: str | None, expected: int
):
    # Ray's default is 15, below any other work on the machine; a local instance is the
    # job's own compute. A niceness the environment asks for is kept.
    script = tmp_path / "nice.py"
    script.write_text(NICENESS)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_worker_niceness", "RAY_ADDRESS")}
    if preset is not None:
        env["RAY_worker_niceness"] = preset
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"worker niceness {expected}\n" in proc.stdout


# -- mlbridge train phase-order -----------------------------------------------------------


def train_phase_order(
    corpus: Path, out: Path, *args: str, cluster: Cluster | None = None, timeout: float = 300
) -> tuple[int, str]:
    """``python -m mlbridge train phase-order`` on ``corpus`` into the folder ``out``,
    joining ``cluster`` (``None``: the arguments say where): (status, stderr)."""
    where = ["--ray-address", cluster.address] if cluster is not None else []
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", "phase-order", "--corpus", str(corpus),
         *PHASE_ORDER_JOB, *where, *args, "-o", str(out)],
        capture_output=True, text=True, timeout=timeout, env=job_env(cluster), cwd=out.parent,
    )  # fmt: skip
    assert proc.stdout == "", f"the command wrote to stdout: {proc.stdout!r}"
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def phase_order_run(cluster: Cluster, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """The uninterrupted two-iteration phase-ordering job on both nodes: (folder, stderr)."""
    cluster.ensure_worker()
    out = tmp_path_factory.mktemp("phase-order-run") / "out"
    status, log = train_phase_order(
        corpus, out, "--workers", "2", "--iterations", "2", cluster=cluster
    )
    assert status == 0, log
    return out, log


def phase_order_checkpoint(out: Path, iteration: int) -> dict:
    doc = json.loads((out / "checkpoints" / f"iteration-{iteration:06d}.json").read_text())
    assert doc["iteration"] == iteration
    return doc["state"]


def test_a_phase_order_job_runs_its_episodes_on_both_nodes(phase_order_run):
    out, log = phase_order_run
    metrics = json.loads((out / "metrics.json").read_text())
    training = metrics["training"]
    pool = training["pool"]
    assert pool["backend"] == "ray" and pool["workers"] == 2
    by_label = {tuple(n["labels"]): n for n in pool["rollouts_by_node"]}
    assert set(by_label) == {("node_head",), ("node_worker",)}, pool
    assert all(n["rollouts"] > 0 for n in by_label.values()), pool
    # 1 probe of the pass, 2 teacher episodes, 2 x (2 modules x 2 episodes), 2 x 2 greedy.
    assert sum(n["rollouts"] for n in by_label.values()) == training["rollouts"] == 15
    assert pool["retried_rollouts"] == 0 and pool["lost_nodes"] == []
    ids = node_ids(log)
    assert set(ids) == {"node_head", "node_worker"}, log
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [
        "iteration-000000.json",
        "iteration-000001.json",
        "iteration-000002.json",
    ]
    # Each iteration moved the policy (so equal policies below say something).
    policies = [phase_order_checkpoint(out, i)["policy"]["weights"] for i in (0, 1, 2)]
    assert policies[0] != policies[1] != policies[2]
    tags = scalars(out / "tensorboard")
    assert sorted(tags["reward/mean_size_reduction_pct"]) == [0, 1, 2]
    assert sorted(tags["policy/entropy"]) == [1, 2]
    assert tags["reward/mean_size_reduction_pct"][2] == pytest.approx(
        training["iterations"][1]["mean_relative_return"] * 100, abs=1e-4
    )
    walls = [tags["time/wall_s"][s] for s in (0, 1, 2)]
    assert 0 < walls[0] < walls[1] < walls[2] <= training["wall_seconds"] + 0.001
    png = (out / "curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert metrics["export_agreement"]["fraction"] == 1.0


def test_a_phase_order_job_without_ray_reaches_the_same_policy(
    phase_order_run, corpus: Path, tmp_path: Path
):
    on_ray, _ = phase_order_run
    out = tmp_path / "out"
    status, log = train_phase_order(corpus, out, "--no-ray", "--workers", "2", "--iterations", "2")
    assert status == 0, log
    assert "2 episodes at once in this process (no Ray)" in log
    mine = json.loads((out / "policy.json").read_text())
    theirs = json.loads((on_ray / "policy.json").read_text())
    assert mine["weights"] == theirs["weights"]
    assert json.loads((out / "metrics.json").read_text())["training"]["pool"]["backend"] == "local"


def test_a_resumed_phase_order_job_reaches_the_policy_of_an_uninterrupted_one(
    phase_order_run, cluster: Cluster, corpus: Path, tmp_path: Path
):
    whole, _ = phase_order_run
    cluster.ensure_worker()
    out = tmp_path / "out"
    # The first iteration without Ray, the second on the cluster: a checkpoint does not
    # depend on the pool.
    status, log = train_phase_order(corpus, out, "--no-ray", "--iterations", "1")
    assert status == 0, log
    status, log = train_phase_order(
        corpus, out, "--workers", "2", "--iterations", "2", "--resume", cluster=cluster
    )
    assert status == 0, log
    assert re.search(r"resuming from .*iteration-000001\.json \(iteration 1/2\)", log), log
    assert "warm start:" not in log  # the cloned policy came from the checkpoint
    resumed = json.loads((out / "policy.json").read_text())
    assert resumed["weights"] == json.loads((whole / "policy.json").read_text())["weights"]
    mine, theirs = phase_order_checkpoint(out, 2), phase_order_checkpoint(whole, 2)
    for key in ("policy", "cloned", "optimizer", "rng"):
        assert mine[key] == theirs[key], key
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["training"]["resumed_from_iteration"] == 1
    # The export check sees every observation of both segments.
    before = json.loads((whole / "metrics.json").read_text())["export_agreement"]
    assert metrics["export_agreement"] == before
    assert sorted(scalars(out / "tensorboard")["reward/mean_size_reduction_pct"]) == [0, 1, 2]


# -- mlbridge train regalloc --------------------------------------------------------------

#: A module where the basic policy spills (so that REINFORCE has a signal) and another; both
#: have two functions after -O2, and are sampled (the policy allocates one per rollout).
REGALLOC_SOURCES = [
    REPO / "test" / "lit" / "Inputs" / "regalloc-pressure.c",
    REPO / "test" / "lit" / "Inputs" / "inline.c",
]
#: Cloning on both modules, then iterations of 1 module x 2 rollouts, the validation on 1
#: module; no held-out evaluation. Rollouts: 2 preparations, 2 collections, 2 per
#: iteration, 2 validation runs.
REGALLOC_JOB = ["--bc-modules", "2", "--bc-epochs", "2", "--modules-per-iteration", "1",
                "--episodes-per-module", "2", "--validation-modules", "1", "--hidden", "8",
                "--samples-per-function", "16", "--sample-functions", "1", "--seed", "2",
                "--no-eval"]  # fmt: skip


@pytest.fixture(scope="module")
def regalloc_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("regalloc-corpus"), REGALLOC_SOURCES)


def train_regalloc(
    corpus: Path, out: Path, *args: str, cluster: Cluster | None = None, timeout: float = 300
) -> tuple[int, str]:
    """``python -m mlbridge train regalloc`` on ``corpus`` into the folder ``out``, joining
    ``cluster`` (``None``: the arguments say where): (status, stderr)."""
    where = ["--ray-address", cluster.address] if cluster is not None else []
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", "regalloc", "--corpus", str(corpus),
         *REGALLOC_JOB, *where, *args, "-o", str(out)],
        capture_output=True, text=True, timeout=timeout, env=job_env(cluster), cwd=out.parent,
    )  # fmt: skip
    assert proc.stdout == "", f"the command wrote to stdout: {proc.stdout!r}"
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def regalloc_run(cluster: Cluster, regalloc_corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """The uninterrupted two-iteration regalloc job on both nodes: (folder, stderr)."""
    cluster.ensure_worker()
    out = tmp_path_factory.mktemp("regalloc-run") / "out"
    status, log = train_regalloc(
        regalloc_corpus, out, "--workers", "2", "--iterations", "2", cluster=cluster
    )
    assert status == 0, log
    return out, log


def test_a_regalloc_job_runs_its_rollouts_on_both_nodes(regalloc_run):
    out, log = regalloc_run
    metrics = json.loads((out / "metrics.json").read_text())
    training = metrics["training"]
    pool = training["pool"]
    assert pool["backend"] == "ray" and pool["workers"] == 2
    by_label = {tuple(n["labels"]): n for n in pool["rollouts_by_node"]}
    assert set(by_label) == {("node_head",), ("node_worker",)}, pool
    assert all(n["rollouts"] > 0 for n in by_label.values()), pool
    # 2 preparations, 2 collections, 2 x 2 sampled rollouts, 2 validation runs.
    assert sum(n["rollouts"] for n in by_label.values()) == training["rollouts"] == 10
    assert pool["retried_rollouts"] == 0 and pool["lost_nodes"] == []
    assert set(node_ids(log)) == {"node_head", "node_worker"}, log
    # Both modules were sampled: the policy allocated one function per rollout.
    assert "2 of 2 modules have more than 1 functions" in log
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [
        "iteration-000000.json",
        "iteration-000001.json",
        "iteration-000002.json",
    ]
    # Each iteration moved the policy (so equal policies below say something).
    policies = [phase_order_checkpoint(out, i)["policy"]["weights"] for i in (0, 1, 2)]
    assert policies[0] != policies[1] != policies[2]
    tags = scalars(out / "tensorboard")
    assert sorted(tags["cloning/agreement_pct"]) == [0]
    assert sorted(tags["cost/sampled_vs_basic_pct"]) == [1, 2]
    assert tags["cost/sampled_vs_basic_pct"][2] == pytest.approx(
        training["iterations"][1]["sampled_vs_basic"] * 100, abs=1e-4
    )
    walls = [tags["time/wall_s"][s] for s in (0, 1, 2)]
    assert 0 < walls[0] < walls[1] < walls[2] <= training["wall_seconds"] + 0.001
    png = (out / "learning-curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert metrics["export_agreement"]["fraction"] == 1.0


def test_a_regalloc_job_without_ray_reaches_the_same_policy(
    regalloc_run, regalloc_corpus: Path, tmp_path: Path
):
    on_ray, _ = regalloc_run
    out = tmp_path / "out"
    status, log = train_regalloc(
        regalloc_corpus, out, "--no-ray", "--workers", "2", "--iterations", "2"
    )
    assert status == 0, log
    assert "2 compilations at once in this process (no Ray)" in log
    mine = json.loads((out / "policy.json").read_text())
    theirs = json.loads((on_ray / "policy.json").read_text())
    assert mine["weights"] == theirs["weights"]
    assert json.loads((out / "metrics.json").read_text())["training"]["pool"]["backend"] == "local"


def test_a_resumed_regalloc_job_reaches_the_policy_of_an_uninterrupted_one(
    regalloc_run, cluster: Cluster, regalloc_corpus: Path, tmp_path: Path
):
    whole, _ = regalloc_run
    cluster.ensure_worker()
    out = tmp_path / "out"
    # The first iteration without Ray, the second on the cluster: a checkpoint does not
    # depend on the pool.
    status, log = train_regalloc(regalloc_corpus, out, "--no-ray", "--iterations", "1")
    assert status == 0, log
    status, log = train_regalloc(
        regalloc_corpus, out, "--workers", "2", "--iterations", "2", "--resume", cluster=cluster
    )
    assert status == 0, log
    assert re.search(r"resuming from .*iteration-000001\.json \(iteration 1/2\)", log), log
    assert "cloning epoch" not in log  # the cloned policy came from the checkpoint
    resumed = json.loads((out / "policy.json").read_text())
    assert resumed["weights"] == json.loads((whole / "policy.json").read_text())["weights"]
    mine, theirs = phase_order_checkpoint(out, 2), phase_order_checkpoint(whole, 2)
    for key in ("policy", "cloned", "optimizer", "rng", "capped", "rollouts"):
        assert mine[key] == theirs[key], key
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["training"]["resumed_from_iteration"] == 1
    # The export check sees every recorded observation of both segments.
    before = json.loads((whole / "metrics.json").read_text())["export_agreement"]
    assert metrics["export_agreement"] == before
    assert sorted(scalars(out / "tensorboard")["time/wall_s"]) == [0, 1, 2]
