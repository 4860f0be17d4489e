"""Every command README.md and docs/*.md show a user is executed, so that none can rot.

Each fenced block of a page is one of:

- ``sh``/``bash``: every logical line (``\\``-continued lines joined, ``#`` comment lines
  left out) is a command; each is run and must exit 0.
- ``console``: lines starting with ``$ `` are commands (continued with ``\\``); the lines
  up to the next command are output the command must print, in order, each matching one
  line of its stdout+stderr (``...`` in an expected line matches any text).
- ``python``: the block is run as a script (``python BLOCK.py``) and must exit 0.
- any other language (``text``, ``cpp``, ``proto``, ...): not a command. A block without
  a language fails (say what it is), and so does a non-command block whose lines start like
  a command (``mlbridge ...``, ``opt-22 ...``) unless annotated.

The commands of a page run in order in one ``bash`` of the page (what a user typing
them into a terminal gets: variables, ``&`` jobs and files carry over), in a temporary
folder that looks like the checkout (a symlink to each top-level entry; ``build`` is
``$MLBRIDGE_BUILD_DIR``), with ``.venv/bin`` first on ``PATH``, ``MLBRIDGE_BUILD_DIR``
set and a fresh model registry of the page (``MLBRIDGE_MODEL_REGISTRY``). Selecting one
command's test runs the page's earlier commands first.

HTML comments directly before a block change how it is tested (they do not render):

- ``<!-- doc-test: skip: REASON -->``: not run, for commands that cannot run in a test by
  nature (the full benchmark, building into the lead's build folder); REASON is required.
- ``<!-- doc-test: ci -->``: commands ``.ci/run`` runs (``make demo``, ``make test``);
  the test checks that ``.ci/run`` does.
- ``<!-- doc-test: synopsis -->``: a usage synopsis with placeholders; every ``--option``
  it names must appear in ``COMMAND --help``.
- ``<!-- doc-test: replace: OLD => NEW -->``: run the block's commands with OLD replaced
  by NEW (the smallest honest form of a long run, e.g. ``--iterations 14`` =>
  ``--iterations 1``); OLD must occur in the block.
- ``<!-- doc-test: timeout: SECONDS -->``: a longer bound than the default.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, build_dir

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXECUTED = {"sh", "bash", "console", "python"}
DEFAULT_TIMEOUT = 180.0
DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(?P<body>.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent> {0,3})```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
# A non-command block starting like one of these is probably a command in disguise.
COMMAND_WORDS = re.compile(
    r"^(\$ )?(mlbridge|opt-22|llc-22|mlir-opt-22|clang-22|make|python3?|\.venv/bin/\S*)"
    r"(\s+[^\s:]+(\s|$)|$)"
)


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str]  # the block's text, fence excluded
    directives: list[str] = field(default_factory=list)


@dataclass
class Command:
    block: Block
    line: int  # 1-based line in the page
    text: str
    expected: list[str] = field(default_factory=list)  # console output lines

    @property
    def id(self) -> str:
        return f"{self.block.page}:{self.line}"


def page_name(path: Path) -> str:
    return str(path.relative_to(REPO))


def parse_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(text):
        m = FENCE.match(text[i])
        if not m:
            i += 1
            continue
        indent = len(m["indent"])
        j = i + 1
        while j < len(text) and not text[j].strip().startswith("```"):
            j += 1
        if j == len(text):
            raise AssertionError(f"{page_name(path)}:{i + 1}: code block never closed")
        directives: list[str] = []
        k = i - 1
        while k >= 0 and (d := DIRECTIVE.match(text[k].strip())):
            directives.insert(0, d["body"])
            k -= 1
        body = [line[indent:] if line[:indent].strip() == "" else line for line in text[i + 1 : j]]
        blocks.append(Block(page_name(path), i + 1, m["lang"], body, directives))
        i = j + 1
    return blocks


def directive(block: Block, name: str) -> list[str]:
    """The arguments of every ``name`` directive of ``block`` (``[""]`` for a bare one)."""
    found = []
    for d in block.directives:
        head, _, rest = d.partition(":")
        if head.strip() == name:
            found.append(rest.strip())
    return found


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """(page line, text) of each command line, continuation lines joined."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    heredoc: str | None = None
    for n, raw in enumerate(block.lines):
        line_no = block.line + 1 + n
        if heredoc is not None:  # a here-document's lines belong to its command
            out[-1] = (out[-1][0], out[-1][1] + "\n" + raw)
            if raw == heredoc:
                heredoc = None
            continue
        if not pending:
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            start = line_no
        if raw.rstrip().endswith("\\"):  # kept: bash joins the lines
            pending.append(raw.rstrip())
            continue
        pending.append(raw)
        out.append((start, "\n".join(pending)))
        if m := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", raw):
            heredoc = m[1]
        pending = []
    if heredoc is not None:
        raise AssertionError(f"{block.page}:{start}: a here-document never ends")
    if pending:
        raise AssertionError(f"{block.page}:{start}: a command ends with a line continuation")
    return out


def console_commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    continuing = False
    for n, raw in enumerate(block.lines):
        line_no = block.line + 1 + n
        if continuing:
            commands[-1].text += "\n" + raw.rstrip()
            continuing = raw.rstrip().endswith("\\")
        elif raw.startswith("$ "):
            commands.append(Command(block, line_no, raw[2:].rstrip()))
            continuing = raw.rstrip().endswith("\\")
        elif commands:
            if raw.strip():
                commands[-1].expected.append(raw.strip())
        elif raw.strip():
            raise AssertionError(
                f"{block.page}:{line_no}: a console block starts with output, not `$ command`"
            )
    return commands


def synopsis_commands(block: Block) -> list[Command]:
    """A synopsis line starts with the command; indented lines continue it."""
    commands: list[Command] = []
    for n, raw in enumerate(block.lines):
        if raw.strip() and raw[0].isspace() and commands:
            commands[-1].text += " " + raw.strip()
        elif raw.strip():
            commands.append(Command(block, block.line + 1 + n, raw.strip()))
    return commands


def block_commands(block: Block) -> list[Command]:
    if directive(block, "synopsis"):
        return synopsis_commands(block)
    if block.lang == "console":
        return console_commands(block)
    if block.lang == "python":
        return [Command(block, block.line, "\n".join(block.lines))]
    return [Command(block, line, text) for line, text in logical_lines(block)]


ALL_BLOCKS = {page_name(p): parse_blocks(p) for p in PAGES}
PAGE_COMMANDS: dict[str, list[Command]] = {
    page: [c for b in blocks if b.lang in EXECUTED for c in block_commands(b)]
    for page, blocks in ALL_BLOCKS.items()
}
# Skipped blocks have no test; test_every_directive_is_known_and_before_a_block checks
# that each says why.
ALL_COMMANDS = [
    c for commands in PAGE_COMMANDS.values() for c in commands if not directive(c.block, "skip")
]


def apply_replacements(command: Command) -> str:
    text = command.text
    for rule in directive(command.block, "replace"):
        old, sep, new = rule.partition(" => ")
        assert sep, f"{command.block.page}:{command.block.line}: replace needs `OLD => NEW`"
        text = text.replace(old, new)
    return text


def wildcard(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")))


def check_output(command: Command, output: str) -> None:
    lines = [line.strip() for line in output.splitlines()]
    at = 0
    for expected in command.expected:
        pattern = wildcard(expected)
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            pytest.fail(
                f"{command.id}: the documented output line\n  {expected}\nis not in what the "
                f"command printed (in order):\n{output}",
                pytrace=False,
            )
        at += 1


# -- the page's shell -------------------------------------------------------------------


class PageShell:
    """One ``bash`` per page in a folder that looks like the checkout."""

    def __init__(self, root: Path) -> None:
        self.work = root / "checkout"
        self.control = root / "control"
        self.work.mkdir()
        self.control.mkdir()
        for entry in REPO.iterdir():
            if entry.name == ".git" or entry.name.startswith("build"):
                continue
            (self.work / entry.name).symlink_to(entry)
        (self.work / "build").symlink_to(build_dir().resolve())
        env = dict(os.environ)
        env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["MLBRIDGE_BUILD_DIR"] = str(build_dir().resolve())
        env["MLBRIDGE_MODEL_REGISTRY"] = str(root / "registry")
        env.pop("VIRTUAL_ENV", None)
        self.log = open(self.control / "shell.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=self.work,
            env=env,
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.count = 0
        self.dead: str | None = None
        self.ran = 0  # how many of the page's commands ran
        self.failed: list[str] = []

    def run(self, script: str, timeout: float) -> tuple[int, str]:
        if self.dead is not None:
            pytest.fail(self.dead, pytrace=False)
        self.count += 1
        out = self.control / f"out.{self.count}"
        rc = self.control / f"rc.{self.count}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            f"{{\n{script}\n}} >{shlex.quote(str(out))} 2>&1 </dev/null\n"
            f"echo $? >{shlex.quote(str(rc))}.tmp && mv {shlex.quote(str(rc))}.tmp "
            f"{shlex.quote(str(rc))}\n".encode()
        )
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while not rc.is_file():
            if self.proc.poll() is not None:
                self.dead = f"the page's shell exited (status {self.proc.returncode})"
                break
            if time.monotonic() > deadline:
                self.stop()
                self.dead = "the page's shell was stopped after an earlier command timed out"
                output = out.read_text(errors="replace") if out.is_file() else ""
                pytest.fail(f"timed out after {timeout:.0f} s; output:\n{output}", pytrace=False)
            time.sleep(0.05)
        output = out.read_text(errors="replace") if out.is_file() else ""
        if self.dead is not None:
            pytest.fail(f"{self.dead}; output:\n{output}", pytrace=False)
        return int(rc.read_text()), output

    def stop(self) -> None:
        # The shell, and every job a command left running (`mlbridge serve ... &`).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


_SHELLS: dict[str, PageShell] = {}


@pytest.fixture(scope="session")
def shells(tmp_path_factory: pytest.TempPathFactory):
    yield _SHELLS
    for shell in _SHELLS.values():
        shell.stop()
    _SHELLS.clear()


def page_shell(shells: dict[str, PageShell], page: str, factory: pytest.TempPathFactory):
    if page not in shells:
        shells[page] = PageShell(factory.mktemp(re.sub(r"[^A-Za-z0-9]+", "-", page)))
    return shells[page]


def timeout_of(block: Block) -> float:
    values = directive(block, "timeout")
    return float(values[-1]) if values else DEFAULT_TIMEOUT


def execute(shell: PageShell, command: Command) -> tuple[int, str]:
    """Run ``command`` in the page's shell; its (exit status, output)."""
    if command.block.lang == "python":
        script = shell.control / f"block-{command.line}.py"
        script.write_text(command.text + "\n", encoding="utf-8")
        return shell.run(f"python {shlex.quote(str(script))}", timeout_of(command.block))
    return shell.run(apply_replacements(command), timeout_of(command.block))


def runnable(command: Command) -> bool:
    return not (
        directive(command.block, "skip")
        or directive(command.block, "ci")
        or directive(command.block, "synopsis")
    )


# -- the tests --------------------------------------------------------------------------


def check_ci(command: Command) -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.split("#", 1)[0].strip() for line in ci.splitlines()]
    run = [re.sub(r"^(exec|time)\s+", "", line) for line in lines if line]
    text = command.text.split("#", 1)[0].strip()
    assert text in run, f"{command.id}: `{text}` is marked as run by CI, but .ci/run does not"


def check_synopsis(command: Command) -> None:
    words = []
    for word in shlex.split(command.text.replace("[", " [ ").replace("|", " | ")):
        if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break
        words.append(word)
    assert words, f"{command.id}: the synopsis names no command"
    help_text = subprocess.run(
        [*words, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"},
    )
    assert help_text.returncode == 0, f"`{' '.join(words)} --help` failed:\n{help_text.stderr}"
    named = set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", command.text))
    offered = set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", help_text.stdout)) - {"-h", "--help"}
    assert named <= offered, (
        f"{command.id}: the synopsis names {sorted(named - offered)}, which "
        f"`{' '.join(words)} --help` does not offer:\n{help_text.stdout}"
    )
    # Each option of --help (its aliases together, e.g. -v, --verbose) must be shown.
    for line in help_text.stdout.splitlines():
        if not re.match(r"^\s+-", line):
            continue
        aliases = set(
            re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", re.split(r"\s{2,}", line.strip())[0])
        )
        assert aliases & {"-h", "--help"} or aliases & named, (
            f"{command.id}: `{' '.join(words)} --help` offers {'/'.join(sorted(aliases))}, "
            "which the synopsis does not show"
        )


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=[c.id for c in ALL_COMMANDS])
def test_documented_command(
    command: Command, shells: dict[str, PageShell], tmp_path_factory: pytest.TempPathFactory
) -> None:
    if directive(command.block, "ci"):
        check_ci(command)
        return
    if directive(command.block, "synopsis"):
        check_synopsis(command)
        return
    # `make` sets up and builds in the checkout the page's folder links to: never here.
    assert not re.match(r"^\s*make(\s|$)", command.text), (
        f"{command.id}: `make` targets run the set-up and the build in the checkout; "
        "annotate the block (ci: run by .ci/run, or skip: REASON)"
    )
    page = command.block.page
    shell = page_shell(shells, page, tmp_path_factory)
    commands = PAGE_COMMANDS[page]
    index = commands.index(command)
    # The page's earlier commands first (they made the files this one reads).
    while shell.ran < index:
        earlier = commands[shell.ran]
        shell.ran += 1
        if runnable(earlier) and not re.match(r"^\s*make(\s|$)", earlier.text):
            status, _ = execute(shell, earlier)
            if status != 0:
                shell.failed.append(earlier.id)
    shell.ran = index + 1
    status, output = execute(shell, command)
    before = f" (earlier commands of the page failed: {', '.join(shell.failed)})"
    if status != 0:
        shell.failed.append(command.id)
        pytest.fail(
            f"{command.id}: exit status {status}{before if shell.failed[:-1] else ''}:\n"
            f"{apply_replacements(command)}\n--- output:\n{output}",
            pytrace=False,
        )
    check_output(command, output)


def test_every_replacement_matches_its_block() -> None:
    for blocks in ALL_BLOCKS.values():
        for block in blocks:
            text = "\n".join(block.lines)
            for rule in directive(block, "replace"):
                old, sep, _ = rule.partition(" => ")
                assert sep, f"{block.page}:{block.line}: replace needs `OLD => NEW`"
                assert old in text, f"{block.page}:{block.line}: `{old}` is not in the block"


def test_every_directive_is_known_and_before_a_block() -> None:
    known = {"skip", "ci", "synopsis", "replace", "timeout"}
    for path in PAGES:
        page = page_name(path)
        lines = path.read_text(encoding="utf-8").split("\n")
        for n, line in enumerate(lines):
            if "doc-test" not in line:
                continue
            m = DIRECTIVE.match(line.strip())
            assert m, f"{page}:{n + 1}: not a `<!-- doc-test: ... -->` line"
            head, _, rest = m["body"].partition(":")
            assert head.strip() in known, f"{page}:{n + 1}: unknown directive {head!r}"
            if head.strip() == "skip":
                assert len(rest.split()) >= 3, f"{page}:{n + 1}: a skip needs a reason"
            following = n + 1
            while DIRECTIVE.match(lines[following].strip()):
                following += 1
            assert FENCE.match(lines[following]), (
                f"{page}:{n + 1}: a doc-test directive must be directly before a code block"
            )


def test_every_block_says_what_it_is() -> None:
    for blocks in ALL_BLOCKS.values():
        for block in blocks:
            assert block.lang, (
                f"{block.page}:{block.line}: a code block without a language: use sh/console/"
                "python for what a user runs (then it is executed), text for output or layouts"
            )
            if block.lang in EXECUTED or block.directives:
                continue
            for n, line in enumerate(block.lines):
                assert not COMMAND_WORDS.match(line), (
                    f"{block.page}:{block.line + 1 + n}: looks like a command in a "
                    f"```{block.lang} block, which is not executed: make it ```sh (or annotate it)"
                )


def test_every_shell_block_has_a_command() -> None:
    for blocks in ALL_BLOCKS.values():
        for block in blocks:
            if block.lang in EXECUTED:
                assert block_commands(block), f"{block.page}:{block.line}: no command in block"


def test_readme_lists_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Documentation\n", 1)
    assert len(section) == 2, "README.md has no `## Documentation` section"
    index = section[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", index))
    pages = {page_name(p) for p in PAGES if p.parent.name == "docs"}
    assert pages - listed == set(), f"README's documentation index omits {sorted(pages - listed)}"
    assert listed - pages == set(), f"README's index lists missing pages {sorted(listed - pages)}"
