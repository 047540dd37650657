"""The command line as a user meets it: --help and --version, flags in either place,
what -q leaves out, warnings in the user's words, and the progress bars on a real
(pseudo-)terminal."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

import scalepca
from scalepca.cli import EXIT_INTERRUPTED, EXIT_OK, build_parser, main

from ._terminal import assert_no_stale_characters, run_in_pty, shown, still_running

SCALEPCA = str(Path(sys.executable).parent / "scalepca")
COMMANDS = ("run", "transform", "info", "validate", "plan", "make-data", "pp-pca")


def _main(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _subparsers(parser):
    action = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return action.choices


# -- help, version, flags --------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"scalepca {scalepca.__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_option_with_an_example(command):
    sub = _subparsers(build_parser())[command]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, (
            f"{command} {action.option_strings or action.dest}: no help text"
        )
    text = sub.format_help()
    # an example of the command, as one types it
    assert "examples:\n  scalepca " + command in text, text
    # plain text: no reST markup leaks into the terminal
    for markup in ("``", ":class:", ":func:", ":mod:", ":data:"):
        assert markup not in text, (command, markup)
    assert "``" not in build_parser().format_help()


def test_make_data_help_gives_defaults():
    text = " ".join(_subparsers(build_parser())["make-data"].format_help().split())
    for option, default in (
        ("--n-samples N", "default 100,000"),
        ("--n-features N", "default: the kind's, or 100"),
        ("--chunk-rows N", "50,000 for low_rank"),
        ("--dtype DTYPE", "float64 for low_rank"),
        ("--seed SEED", "default 0"),
        ("--overwrite", "default: refuse"),
    ):
        assert re.search(re.escape(option) + r" [^-]*" + re.escape(default), text), (
            option
        )


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_quiet_before_or_after_the_command(where):
    parser = build_parser()
    for flags in (["-v"], ["-q"], ["-v", "-q"], []):
        argv = (
            [*flags, "info", "x.zarr"]
            if where == "before"
            else ["info", "x.zarr", *flags]
        )
        args = parser.parse_args(argv)
        assert args.verbose == ("-v" in flags) and args.quiet == ("-q" in flags), argv


# -- what -q and info leave out --------------------------------------------------------
def test_make_data_quiet_prints_nothing(tmp_path, capsys):
    pytest.importorskip("anndata")
    # counts: an AnnData store, whose zarr writer raises zarr's autosharding notice
    for kind in ("low_rank", "counts"):
        rc, out, err = _main(
            capsys,
            "make-data",
            tmp_path / f"{kind}.zarr",
            "--kind",
            kind,
            "--n-samples",
            500,
            "--n-features",
            30,
            "-q",
        )
        assert rc == EXIT_OK, err
        assert out == "" and err == "", (kind, out, err)


def test_info_of_a_model_hides_private_state(tmp_path, capsys):
    import xarray as xr

    # gridded data: the model keeps the grid's template (a private entry) to map
    # components back
    X = xr.DataArray(
        np.random.default_rng(0).standard_normal((50, 4, 5)),
        dims=("time", "lat", "lon"),
        coords={"lat": np.arange(4.0), "lon": np.arange(5.0)},
    )
    scalepca.PCA(2).fit(scalepca.open_matrix(X, sample_dims="time")).save(
        tmp_path / "m.zarr"
    )
    rc, out, _ = _main(capsys, "info", tmp_path / "m.zarr")
    assert rc == EXIT_OK
    assert "scalepca model" in out and "n_components_: 2" in out
    assert not re.search(r"^\s+_\w+:", out, re.M), out  # no _feature_template_json, ...
    assert re.search(r"\(\d+ private entries not shown; -v shows them\)", out), out
    rc, out, _ = _main(capsys, "info", tmp_path / "m.zarr", "-v")
    assert re.search(r"^\s+_\w+:", out, re.M), out


# -- warnings --------------------------------------------------------------------------
def test_user_warnings_in_the_user_words_library_notices_dropped(tmp_path, capsys):
    import warnings

    from scalepca.app.console import cli_warnings

    zarr.create_array(tmp_path / "ints.zarr", data=np.arange(600).reshape(100, 6) % 7)
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {"path": str(tmp_path / "ints.zarr")},
                "model": {"method": "pca", "n_components": 2},
                "cluster": {
                    "kind": "local",
                    "n_workers": 1,
                    "threads_per_worker": 1,
                    "processes": False,
                },
                "output": {"store": None},
                "progress": False,
            }
        )
    )
    rc, out, err = _main(capsys, "run", cfg, "-q")
    assert rc == EXIT_OK, err
    # "X has dtype int64; ..." from the library, said of the data, on one line
    assert (
        err == "scalepca: warning: the data has dtype int64; converting to float64\n"
    ), err
    with cli_warnings(command="run"):
        import dask.array

        warnings.warn(
            "Increasing number of chunks by factor of 12",
            dask.array.core.PerformanceWarning,
            stacklevel=1,
        )
        warnings.warn(
            "zarr v3 autosharding will be the default", UserWarning, stacklevel=1
        )
    assert capsys.readouterr().err == ""


# -- progress on a terminal ------------------------------------------------------------
@pytest.fixture(scope="module")
def terminal_env():
    root = str(Path(scalepca.__file__).parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "DASK_SCALEPCA__PROGRESS__GRACE": "0",
        "TERM": "xterm-256color",
        "PYTHONWARNINGS": "",
    }


def _bars(text: str, label: str) -> list[str]:
    """The final frame of every line whose frames start with ``label``."""
    return [
        line.rsplit("\r", 1)[-1]
        for line in text.split("\n")
        if line.rsplit("\r", 1)[-1].startswith(label)
    ]


_BAR = r"{label}: 100%\|[█#]+\| {n}/{n} chunks \[\d\d:\d\d<00:00, +[\d,.]+ chunks/s\]"


def test_make_data_and_run_on_a_terminal(tmp_path, terminal_env):
    """One labelled bar per pass (method, pass and name, chunks, elapsed<ETA, rate),
    nothing left over from a longer frame, and no library notice on the screen."""
    data = tmp_path / "d.zarr"
    rc, text = run_in_pty(
        [
            SCALEPCA,
            "make-data",
            str(data),
            "--n-samples",
            "40000",
            "--n-features",
            "50",
            "--chunk-rows",
            "5000",
        ],
        env=terminal_env,
    )
    assert rc == EXIT_OK, text
    assert_no_stale_characters(text)
    bars = _bars(text, "make-data low_rank")
    assert len(bars) == 1 and re.fullmatch(
        _BAR.format(label="make-data low_rank", n=8), bars[0].rstrip()
    ), text
    assert re.search(r"^wrote low_rank dataset to .* in [\d.]+ s$", text, re.M), text
    assert "Warning" not in text
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {"path": str(data), "chunks": 5000},
                "model": {
                    "method": "ppca",
                    "n_components": 3,
                    "missing": "em",
                    "max_iter": 3,
                },
                "cluster": {
                    "kind": "local",
                    "n_workers": 1,
                    "threads_per_worker": 2,
                    "processes": False,
                },
                "output": {"store": str(tmp_path / "out"), "report": False},
            }
        )
    )
    rc, text = run_in_pty([SCALEPCA, "run", str(cfg)], env=terminal_env)
    assert rc == EXIT_OK, text
    assert_no_stale_characters(text)
    labels = [
        re.match(r"(.*?): ", shown_line).group(1)
        for shown_line in (shown(line) for line in text.split("\n"))
        if re.search(r"\d+/\d+ chunks \[", shown_line)
    ]
    assert labels[:3] == [
        "PPCA pass 1 (EM initialisation)",
        "PPCA pass 2 (EM iteration 1)",
        "PPCA pass 3 (EM iteration 2)",
    ], text
    # each bar says what it does: the scores' bar names the store it writes
    assert "writing scores.zarr" in labels, labels
    # what starts, said before it does (a cluster may take a while)
    assert re.search(
        r"^scalepca: starting a local Dask cluster \(1 worker thread, 2 "
        r"threads each",
        text,
        re.M,
    ), text
    for line in _bars(text, "PPCA pass"):
        bar = _BAR.format(label=r"PPCA pass \d+ \([\w ]+\)", n=8)
        assert re.fullmatch(bar, line.rstrip()), line
    assert "method: ppca (PPCA)" in text and "Warning" not in text


def test_summary_says_closed_form_not_one_iteration():
    from scalepca.app.pipeline import summary

    X = np.random.default_rng(1).standard_normal((300, 5))
    closed = summary(
        scalepca.PPCA(2).fit(X), data_shape=X.shape, elapsed=0.1, method="ppca"
    )
    assert "solution: closed form" in closed and "iterations:" not in closed
    X[::7, 1] = np.nan
    em = scalepca.PPCA(2, missing="em", max_iter=5, tol=1e-2).fit(X)
    assert f"iterations: {em.n_iter_}" in summary(
        em, data_shape=X.shape, elapsed=0.1, method="ppca"
    )


# -- Ctrl+C ----------------------------------------------------------------------------
def _endless_em_job(tmp_path, n_workers: int):
    """A job config whose PPCA EM fit on a local cluster of ``n_workers`` runs until it
    is interrupted (tol 0 and 10**6 iterations), writing under ``tmp_path``."""
    X = np.random.default_rng(0).standard_normal((8000, 20))
    zarr.create_array(tmp_path / "d.zarr", data=X, chunks=(1000, 20))
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {"path": str(tmp_path / "d.zarr"), "chunks": 1000},
                "model": {
                    "method": "ppca",
                    "n_components": 2,
                    "missing": "em",
                    "tol": 0.0,
                    "max_iter": 10**6,
                },
                "cluster": {
                    "kind": "local",
                    "n_workers": n_workers,
                    "threads_per_worker": 1,
                },
                "output": {"store": str(tmp_path / "out"), "report": False},
            }
        )
    )
    return cfg


def test_ctrl_c_during_a_run(tmp_path, terminal_env):
    """Ctrl+C (SIGINT to the terminal's foreground process group: the command and its
    local cluster's worker processes) once the fit's first pass is under way: the bar
    stays where it stopped, no worker traceback, one line saying nothing was written,
    exit status 130, no worker process left and no output written."""
    cfg = _endless_em_job(tmp_path, n_workers=2)
    rc, text, children = run_in_pty(
        [SCALEPCA, "run", str(cfg)], env=terminal_env, interrupt_at="PPCA pass 1 ("
    )
    workers = [p for p, command in children if "spawn_main" in command]
    assert len(workers) == 2, children
    assert rc == EXIT_INTERRUPTED, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    lines = text.rstrip("\n").split("\n")
    assert lines[-1] == "scalepca: interrupted (nothing written)", text
    # the interrupted pass's bar as it stopped: its last frame (if it has more than one)
    # counts what the one before did, not filled up to 8/8 when it closed
    assert shown(lines[-2]).startswith("PPCA pass"), text
    counts = [
        re.search(r"\| (\d+)/8 chunks", frame).group(1)
        for frame in lines[-2].split("\r")
        if frame
    ]
    assert counts[-1] == counts[-2:][0], text
    assert still_running(workers) == []
    assert not (tmp_path / "out" / "model.zarr").exists()
    assert not (tmp_path / "out" / "scores.zarr").exists()


def _worker_processes(pid: int) -> list:
    """The worker processes the nannies of program ``pid`` started (its local
    cluster's nannies run in it and spawn them)."""
    import psutil

    found = []
    for p in psutil.Process(pid).children(recursive=True):
        try:
            if "spawn_main" in " ".join(p.cmdline()):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def _ended_within(processes, seconds: float) -> list:
    """Those of ``processes`` still running after ``seconds``."""
    import time

    deadline = time.monotonic() + seconds
    while still_running(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return still_running(processes)


def test_ctrl_c_after_a_worker_was_replaced(tmp_path, terminal_env):
    """Ctrl+C once the nanny has replaced a worker process that died: the replacement
    ignores SIGINT as the first worker does, so the press gives the same one line,
    exit status 130 and no traceback, and no process is left running.

    The cluster has one worker, SIGKILLed as the fit's first pass starts; a pass that
    starts after that and ends (the next one starts) ran on the replacement alone, and
    the press comes then."""
    cfg = _endless_em_job(tmp_path, n_workers=1)
    killed = []  # (the killed worker, the last pass started before it was killed)

    def passes(text: str) -> set[int]:
        return {int(n) for n in re.findall(r"PPCA pass (\d+) \(", text)}

    def after_a_replacement(text: str, pid: int) -> bool:
        if not killed:
            if passes(text):
                for p in _worker_processes(pid):
                    p.kill()
                    killed.append((p, max(passes(text))))
            return False
        return len({n for n in passes(text) if n > killed[0][1]}) >= 2

    rc, text, children = run_in_pty(
        [SCALEPCA, "run", str(cfg)], env=terminal_env, interrupt_at=after_a_replacement
    )
    assert len(killed) == 1, (killed, text)
    workers = [p for p, command in children if "spawn_main" in command]
    assert len(workers) == 1 and workers[0].pid != killed[0][0].pid, children
    assert rc == EXIT_INTERRUPTED, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    lines = text.rstrip("\n").split("\n")
    assert lines[-1] == "scalepca: interrupted (nothing written)", text
    # multiprocessing's resource tracker ends once the last worker has
    assert _ended_within([p for p, _ in children], 30) == [], children
    assert not (tmp_path / "out" / "model.zarr").exists()


def _marked(name: str, value: str) -> list:
    """The running processes whose environment holds ``name=value``: a command started
    with it and every process it started (they inherit its environment)."""
    import psutil

    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(name) == value:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return still_running(found)


def test_ctrl_c_while_the_local_cluster_starts(tmp_path, terminal_env):
    """Ctrl+C pressed as the local cluster starts: no pass runs, one line saying
    nothing was written, exit status 130, and no process the command started is left
    running. (A press inside the moment the worker processes are spawned is kept for
    the program: the next test.)"""
    X = np.random.default_rng(0).standard_normal((4000, 10))
    zarr.create_array(tmp_path / "d.zarr", data=X, chunks=(1000, 10))
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data": {"path": str(tmp_path / "d.zarr"), "chunks": 1000},
                "model": {"method": "pca", "n_components": 2},
                "cluster": {"kind": "local", "n_workers": 2, "threads_per_worker": 1},
                "output": {"store": str(tmp_path / "out"), "report": False},
            }
        )
    )
    mark = f"{os.getpid()}-{tmp_path.name}"
    rc, text, _ = run_in_pty(
        [SCALEPCA, "run", str(cfg)],
        env={**terminal_env, "SCALEPCA_TEST_MARK": mark},
        interrupt_at="scalepca: starting a local Dask cluster",
    )
    assert rc == EXIT_INTERRUPTED, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    lines = text.rstrip("\n").split("\n")
    assert lines[-1] == "scalepca: interrupted (nothing written)", text
    assert "pass" not in text.split("starting a local Dask cluster")[1], text
    assert not (tmp_path / "out" / "model.zarr").exists()
    assert _marked("SCALEPCA_TEST_MARK", mark) == []


def test_a_press_while_worker_processes_start_is_kept_and_they_ignore_it():
    """While a local cluster spawns its worker processes, SIGINT is ignored so that they
    start ignoring it (Ctrl+C signals the whole foreground group), and a press made
    meanwhile is kept: it reaches the program's own handler as the start ends. (BLAS's
    threads take a blocked signal, so the program cannot keep it pending itself.)"""
    code = """
import os, signal, subprocess, sys
from scalepca.app.cluster._connect import _interrupts_ignored
child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
try:
    with _interrupts_ignored():
        os.killpg(os.getpgrp(), signal.SIGINT)  # Ctrl+C, while processes start
        started = subprocess.run(
            [sys.executable, "-c", child], capture_output=True, text=True
        ).stdout.strip()
    print("lost", started)
except KeyboardInterrupt:
    print("kept", started)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # a process group of its own, as a terminal's job
    )
    assert r.stdout.split() == ["kept", "True", "True"], r.stdout + r.stderr


@pytest.mark.parametrize(
    "argv, expected",
    [([], []), (["-v"], ["-v"]), ([["-v"]], [["-v"], []])],
    ids=["none", "shared", "each"],
)
def test_worker_setup_joins_the_users_preloads(argv, expected):
    """Every worker process of a local cluster runs the preload that makes it ignore
    SIGINT (a replacement a nanny starts too), after the user's own preloads with
    their arguments; a cluster of threads runs none (it is the program)."""
    import dask

    from scalepca.app.cluster._connect import WORKER_SETUP, _worker_preloads

    settings = {
        "distributed.worker.preload": ["mine"] if argv else [],
        "distributed.worker.preload-argv": argv,
    }
    with dask.config.set(settings):
        got = _worker_preloads({"processes": True})
        assert _worker_preloads({"processes": False}) == {}
    mine = ["mine"] if argv else []
    assert got == {"preload": [*mine, WORKER_SETUP], "preload_argv": expected}


def test_ctrl_c_as_a_bar_is_drawn_ends_its_line_once(monkeypatch):
    """Ctrl+C landing just after a bar drew its first frame, before the display held it
    (seen on a loaded CI machine): the bar is closed once, so its line ends once and the
    next line is the command's own, not an empty one."""
    import gc
    import io
    import signal

    import tqdm

    from scalepca.app._bars import Display

    class Screen(io.StringIO):
        def isatty(self):
            return True

    made = tqdm.tqdm.__init__

    def drawn_then_pressed(self, *args, **kwargs):
        made(self, *args, **kwargs)  # the first frame is on the screen now
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(tqdm.tqdm, "__init__", drawn_then_pressed)
    screen = Screen()
    display = Display(screen, grace=0.0)
    display.pass_started("PPCA", 1, "EM initialisation")
    pressed = False
    try:
        display.compute_started(8, 8)  # draws: the press lands as the bar is made
    except KeyboardInterrupt:
        pressed = True
    assert pressed
    display.close(stopped=True)
    gc.collect()  # a bar nobody held closes itself when collected
    text = screen.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n"), repr(text)


def test_ctrl_c_in_distributed_sync_logs_no_traceback(monkeypatch, caplog):
    """Ctrl+C landing in distributed's ``sync`` before the coroutine it waits on has
    started: distributed's cancel callback raises NameError and tornado logs it with a
    traceback; the command line drops that record (and only that)."""
    import logging
    import threading

    import distributed.utils
    from distributed.utils import LoopRunner, sync

    from scalepca.app.console import interrupt_races_quiet

    class Interrupted(threading.Event):  # Ctrl+C pressed while sync waits
        def wait(self, timeout=None):
            raise KeyboardInterrupt

    runner = LoopRunner(asynchronous=False)
    runner.start()
    hold, held, done = threading.Event(), threading.Event(), threading.Event()
    # the loop is busy, so sync's coroutine has not started when the interrupt lands
    runner.loop.add_callback(lambda: (held.set(), hold.wait()))
    held.wait()

    async def work():
        return 1

    try:
        with (
            caplog.at_level(logging.ERROR, logger="tornado.application"),
            interrupt_races_quiet(),
        ):
            monkeypatch.setattr(distributed.utils.threading, "Event", Interrupted)
            with pytest.raises(KeyboardInterrupt):
                sync(runner.loop, work)
            monkeypatch.undo()
            hold.set()
            runner.loop.add_callback(done.set)  # after sync's cancel callback
            done.wait()
            logging.getLogger("tornado.application").error("another error")
    finally:
        hold.set()
        runner.stop()
    assert [r.getMessage() for r in caplog.records] == ["another error"]


def test_ctrl_c_in_a_garbage_collector_callback_is_not_lost(capfd):
    """Ctrl+C landing in a garbage-collector callback (distributed's ``GCDiagnosis``
    runs one in the program, where the local cluster's scheduler is): Python reports
    the ``KeyboardInterrupt`` as "Exception ignored" and goes on; the command line
    raises it again, printing nothing."""
    import gc
    import time

    from scalepca.app.console import interrupt_races_quiet

    pressed = []

    def collecting(phase, info):
        if not pressed:
            pressed.append(phase)
            raise KeyboardInterrupt  # the press, as the handler raises it

    interrupted = False
    with interrupt_races_quiet():
        gc.callbacks.append(collecting)
        try:
            gc.collect()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # until the interrupt arrives
                pass
        except KeyboardInterrupt:
            interrupted = True
        finally:
            gc.callbacks.remove(collecting)
    assert pressed and interrupted
    assert capfd.readouterr().err == ""
