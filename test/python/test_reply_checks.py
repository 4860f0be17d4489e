"""Wrong advice over the pipe never passes silently (hardening issue #19).

A raw model side (standard library only, not mlbridge's helper, which refuses to send
wrong bytes) answers `opt`'s ML inliner over mlbridge's pipe runner with bitstream, the
default format, under the failure policy ``fail``:

- without ``<base>.ext`` it speaks LLVM's raw protocol, where a reply is the advice's
  bytes and nothing says their type: a reply longer than the advice (two int64, random
  bytes) is detected as leftover bytes; a float64 (or any 8 bytes) in place of an int64
  cannot be (docs/pipe-protocol.md, "What each format detects");
- announcing ``typed-reply``, it frames each reply with the tensor's name, type and shape
  (``{"advice":<id>,"spec":<spec>}`` + bytes + ``\\n``): the runner checks the frame
  against the advice spec and names what it expected and what it got.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, built_plugin

BOUND = 60.0
INPUTS = REPO / "test" / "lit" / "Inputs"
INT64_ADVICE = b'{"name":"inlining_decision","type":"int64_t","port":0,"shape":[1]}'

#: A reply given the observation id: the bytes written to ``<base>.in``.
Reply = Callable[[int], bytes]


def _feature_bytes(spec: dict) -> int:
    count = 1
    for d in spec["shape"]:
        count *= d
    return count * {"int64_t": 8, "float": 4, "double": 8}[spec["type"]]


def raw_host(base: Path, reply: Reply, extensions: str | None, acks: list[dict]) -> None:
    """Answer every observation with ``reply(id)`` until the compiler closes the pipe."""
    if extensions is not None:
        Path(f"{base}.ext").write_text(extensions + "\n")
        os.chmod(f"{base}.ext", 0o600)
    to_compiler = os.open(f"{base}.in", os.O_WRONLY)
    with os.fdopen(to_compiler, "wb", buffering=0) as out, open(f"{base}.out", "rb") as inp:
        line = inp.readline()
        if line.startswith(b'{"extensions":'):
            acks.append(json.loads(line))
            line = inp.readline()
        features = json.loads(line)["features"]
        while line := inp.readline():
            record = json.loads(line)
            if "observation" not in record:
                continue
            for spec in features:
                inp.read(_feature_bytes(spec))
            if inp.read(1) != b"\n":
                return
            try:
                out.write(reply(record["observation"]))
            except BrokenPipeError:
                return  # the compiler refused an earlier reply and closed


def run_opt(tmp_path: Path, reply: Reply, extensions: str | None = None) -> tuple[int, str, list]:
    """Run opt's ML inliner over the pipe against ``raw_host``; exit code, stderr, acks."""
    acks: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="reply-checks-") as d:  # mode 0700
        base = Path(d) / "channel"
        os.mkfifo(f"{base}.in", 0o600)
        os.mkfifo(f"{base}.out", 0o600)
        compiler = subprocess.Popen(
            ["opt-22", f"-load-pass-plugin={built_plugin('llvm')}", "-passes=default<O2>",
             "-mlbridge-inline-runner=pipe", f"-mlbridge-inline-channel={base}",
             "-mlbridge-inline-timeout-ms=20000", "-mlbridge-inline-on-model-failure=fail",
             "-S", str(INPUTS / "inline.ll"), "-o", str(tmp_path / "out.ll")],
            stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            raw_host(base, reply, extensions, acks)
            _, err = compiler.communicate(timeout=BOUND)
        finally:
            if compiler.poll() is None:
                compiler.kill()
                compiler.communicate(timeout=BOUND)
    return compiler.returncode, err.decode(errors="replace"), acks


def typed(spec: bytes, payload: bytes) -> Reply:
    return lambda i: b'{"advice":%d,"spec":%s}\n%s\n' % (i, spec, payload)


# -- LLVM's raw protocol (no <base>.ext) -----------------------------------------------


def test_raw_two_int64_for_one_are_leftover_bytes(tmp_path: Path) -> None:
    code, err, acks = run_opt(tmp_path, lambda i: struct.pack("<qq", 1, 1))
    assert code != 0, err
    assert "inlining_decision" in err and "8 bytes" in err, err
    assert acks == []


def test_raw_random_bytes_longer_than_the_advice_are_leftover_bytes(tmp_path: Path) -> None:
    code, err, _ = run_opt(tmp_path, lambda i: bytes(range(200, 213)))
    assert code != 0, err
    assert "inlining_decision" in err and "5 bytes" in err, err


@pytest.mark.parametrize(
    "reply", [struct.pack("<d", 1.0), bytes(range(240, 248))], ids=["float64", "random8"]
)
def test_raw_eight_wrong_bytes_cannot_be_detected(tmp_path: Path, reply: bytes) -> None:
    # LLVM's raw reply carries no type: 8 bytes of anything read as an int64 of the
    # right size (documented in docs/pipe-protocol.md's table). typed-reply closes this.
    code, err, _ = run_opt(tmp_path, lambda i: reply)
    assert code == 0, err


# -- typed-reply -----------------------------------------------------------------------


def test_typed_reply_is_acknowledged_and_accepted(tmp_path: Path) -> None:
    code, err, acks = run_opt(
        tmp_path, typed(INT64_ADVICE, struct.pack("<q", 1)), "end typed-reply"
    )
    assert code == 0, err
    assert acks == [{"extensions": ["end", "typed-reply"]}]


def test_typed_reply_random_bytes(tmp_path: Path) -> None:
    code, err, _ = run_opt(tmp_path, lambda i: bytes(range(200, 208)), "typed-reply")
    assert code != 0, err
    assert "not a typed reply" in err and "observation 0" in err, err


def test_typed_reply_float64_for_int64(tmp_path: Path) -> None:
    spec = INT64_ADVICE.replace(b"int64_t", b"double")
    code, err, _ = run_opt(tmp_path, typed(spec, struct.pack("<d", 1.0)), "typed-reply")
    assert code != 0, err
    assert "'inlining_decision'" in err, err
    assert "expected int64_t [1]" in err and "got double [1]" in err, err


def test_typed_reply_two_int64_for_one(tmp_path: Path) -> None:
    spec = INT64_ADVICE.replace(b"[1]", b"[2]")
    code, err, _ = run_opt(tmp_path, typed(spec, struct.pack("<qq", 1, 1)), "typed-reply")
    assert code != 0, err
    assert "expected int64_t [1]" in err and "got int64_t [2]" in err, err


def test_typed_reply_more_bytes_than_its_spec(tmp_path: Path) -> None:
    code, err, _ = run_opt(tmp_path, typed(INT64_ADVICE, struct.pack("<qq", 1, 1)), "typed-reply")
    assert code != 0, err
    assert "inlining_decision" in err and "newline" in err, err


# -- mlbridge's model side: framed for mlbridge's runner, raw for stock LLVM ------------


@pytest.mark.parametrize("compiler", ["mlbridge", "stock"])
def test_model_side_frames_only_for_a_runner_that_acknowledges(
    compiler: str, tmp_path: Path
) -> None:
    from mlbridge.compiler.pipe import FifoChannel, PipeCompilerInterface

    if compiler == "mlbridge":
        flags = [
            f"-load-pass-plugin={built_plugin('llvm')}",
            "-mlbridge-inline-runner=pipe",
            "-mlbridge-inline-channel={base}",
            "-mlbridge-inline-on-model-failure=fail",
        ]
    else:
        flags = ["-enable-ml-inliner=release", "-inliner-interactive-channel-base={base}"]
    with FifoChannel(parent=tmp_path) as channel:
        argv = ["opt-22", "-passes=default<O2>", *flags, "-S", str(INPUTS / "inline.ll"),
                "-o", str(tmp_path / "out.ll")]  # fmt: skip
        opt = subprocess.Popen(
            [a.replace("{base}", str(channel.base)) for a in argv], stderr=subprocess.PIPE
        )
        try:
            with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
                answered = ci.run(lambda obs: 1)
                typed_replies, acknowledged = ci.typed_replies, ci.compiler_extensions
            _, err = opt.communicate(timeout=BOUND)
        finally:
            if opt.poll() is None:
                opt.kill()
                opt.communicate(timeout=BOUND)
    assert opt.returncode == 0, err.decode(errors="replace")
    assert answered > 0
    if compiler == "mlbridge":
        assert typed_replies and acknowledged == ("end", "typed-reply")
    else:
        assert not typed_replies and acknowledged == ()
