#!/usr/bin/python3
"""wasmsand's guest agent: serves the host over the virtio-serial port org.wasmsand.agent.

Frames are JSON objects, one per line, both ways. Every request carries an integer `id` and
an `op`; every answer carries the same `id`. A run also sends events (`ev`) before its answer.
Bytes (file contents, output) travel as base64. The host speaks first, always: what the agent
wrote while no host was connected would be lost, so the agent never volunteers anything.

  ping                                   -> {ok, agent, pid}
  prepare                                -> {ok}   before the machine is saved: a spare shell
                                                   is ready and the disk is synced
  thaw   {time_ns, seed, rw}             -> {ok}   after a restore: clock, randomness, rw root
  run    {cmd, timeout_ms, stdout_cap, stderr_cap, stdin?, cwd?, env?}
                                         -> {ev: out, fd, data}* then {ok, exit_code, signal,
                                            timed_out, cancelled, truncated, oom_kill,
                                            pids_max, duration_ms}
  cancel {run}                           -> {ok, found}   ends run `run` as its deadline would
  signal {run, signal}                   -> {ok, found}   sends `signal` to every process of
                                                   run `run` (a TERM before a cancel)
  write  {path, data, mode, append}      -> {ok, size}   parents are created
  read   {path, offset, length}          -> {ok, data, size, eof}
  status                                 -> {ok, mem_total, mem_available, uptime_ms}
  stat   {path}                          -> {ok, name, kind, size}   a final symlink is not
                                                   followed; kind: file, dir, symlink, other
  list   {path}                          -> {ok, entries: [{name, kind, size}]} by name
  mkdir  {path}                          -> {ok, created}   with its parents
  rename {from, to}                      -> {ok}   rename(2)'s rules
  remove {path, recursive}               -> {ok}   a file, a symlink, an empty directory,
                                                   or with `recursive` a tree
  walk   {root, max}                     -> {ok, entries: [{path, kind, size}], cut}
                                                   files and symlinks under root (relative
                                                   paths; links not followed), at most `max`
                                                   entries looked at

Failures answer {ok: false, error, errno?}. Python's standard library only: any image with a
python3 (3.7 or later) runs this file as it is.

A command runs as `bash -c`, but from a *spare*: a shell started ahead of time (its exec,
dynamic linking and start-up cost hundreds of milliseconds under emulation) that waits on a
pipe for the file holding its command, then sources it. A run with its own environment, or
when no spare is ready, starts a shell then and there.
"""

import base64
import ctypes
import ctypes.util
import errno as errno_mod
import fcntl
import json
import os
import queue
import select
import shutil
import signal
import stat as stat_mod
import struct
import sys
import threading
import time

PROTOCOL = 2
PORT_NAME = "org.wasmsand.agent"
CGROUP_ROOT = "/sys/fs/cgroup"
RUNS_CGROUP = CGROUP_ROOT + "/wasmsand-runs"
WORK_DIR = "/run/wasmsand"
# Memory kept out of the runs' reach, so that a command that eats all it can does not take the
# agent (or the kernel) with it.
RESERVED_BYTES = 24 * 1024 * 1024
PIDS_MAX = 256
CHUNK = 64 * 1024
# After a run's processes are killed, how long its pipes may stay open (a process that left
# the run's cgroup or session can hold them) before the answer is sent anyway.
DRAIN_GRACE_S = 0.5
DEFAULT_CWD = "/root"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

IGNORED_SIGNALS = (
    signal.SIGPIPE,
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR1,
    signal.SIGUSR2,
)

RNDADDENTROPY = 0x40085203
RNDRESEEDCRNG = 0x5207
MS_REMOUNT = 32

# The spare shell: reads its command from descriptor 3 (the go signal: `c` and the command,
# or `f` and the path of a file holding it, for long ones: bash reads a pipe a byte at a
# time), and runs it as `bash -c` would: by eval, so that its messages read "bash: ..."; $0
# reads "bash" (BASH_ARGV0) and the helper variable is gone before the command's first word.
SPARE_BASH = (
    'IFS= read -r -d "" __c <&3; exec 3<&-; BASH_ARGV0=bash; '
    'case $__c in f*) IFS= read -r -d "" __c <"${__c#f}";; *) __c=${__c#c};; esac; '
    'eval "unset __c;$__c"'
)
SPARE_SH = 'read -r __c <&3; exec 3<&-; . "${__c#f}"'
# Commands up to this long go through the pipe itself.
INLINE_MAX = 2048


class Port:
    """The virtio-serial port: whole lines in, whole lines out (one writer at a time)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.lock = threading.Lock()
        self.buf = b""

    def lines(self):
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while True:
            events = poller.poll(1000)
            if not events:
                continue
            ev = events[0][1]
            if not ev & select.POLLIN:
                # POLLHUP: no host on the other end (between a restore and the host's
                # connection, or while it is gone). Nothing to read until one comes.
                time.sleep(0.01)
                continue
            try:
                data = os.read(self.fd, CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                time.sleep(0.01)
                continue
            if not data:
                time.sleep(0.01)
                continue
            self.buf += data
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.strip():
                    yield line

    def send(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with self.lock:
            view = memoryview(data)
            deadline = time.monotonic() + 30
            while view:
                try:
                    n = os.write(self.fd, view)
                    view = view[n:]
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        return
                    select.select([], [self.fd], [], 0.5)
                except OSError:
                    # The host went away; it restores or restarts the machine, so what this
                    # answer said is of no use any more.
                    return


def find_port():
    base = "/sys/class/virtio-ports"
    for _ in range(500):
        try:
            for d in sorted(os.listdir(base)):
                try:
                    with open(os.path.join(base, d, "name")) as f:
                        if f.read().strip() == PORT_NAME:
                            return "/dev/" + d
                except OSError:
                    pass
        except OSError:
            pass
        time.sleep(0.02)
    return None


class Failure(Exception):
    def __init__(self, message, err=None):
        super().__init__(message)
        self.err = err


def os_failure(e, what):
    """An OSError as the simple mode words one: `ENOENT: no such file or directory: PATH`."""
    name = errno_mod.errorcode.get(e.errno, "EIO") if e.errno else None
    text = e.strerror or str(e)
    text = text[:1].lower() + text[1:]
    return Failure(f"{name}: {text}: {what}" if name else f"{text}: {what}", name)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                out[key] = int(parts[0]) * 1024
    return out


def uptime_ms():
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * 1000)


def read_small(path):
    """A small kernel file's text in one read (no buffered file object: under emulation
    that costs a millisecond per file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def default_env(shell):
    return {
        "PATH": PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "USER": "root",
        "LOGNAME": "root",
        "SHELL": shell,
    }


def shell_path():
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


class Cgroups:
    """One cgroup per run under /sys/fs/cgroup/wasmsand-runs, when the kernel has cgroup v2:
    a deadline kills every process of the run (even one that left its session), a fork bomb
    meets pids.max, and a memory hog meets memory.max before the agent is in danger."""

    def __init__(self):
        self.ok = False
        self.n = 0
        # The cgroups of shells not yet ended: a sweep must not take one whose shell has not
        # joined it yet (it is empty until then), or that shell cannot start.
        self.live = set()
        self.lock = threading.Lock()
        try:
            if not os.path.exists(CGROUP_ROOT + "/cgroup.controllers"):
                return
            os.makedirs(RUNS_CGROUP, exist_ok=True)
            write_text(CGROUP_ROOT + "/cgroup.subtree_control", "+memory +pids")
            total = meminfo().get("MemTotal", 0)
            limit = max(total - RESERVED_BYTES, 16 * 1024 * 1024)
            write_text(RUNS_CGROUP + "/memory.max", str(limit))
            write_text(RUNS_CGROUP + "/pids.max", str(PIDS_MAX))
            write_text(RUNS_CGROUP + "/cgroup.subtree_control", "+memory +pids")
            self.ok = True
            # The agent (outside the runs' cgroup) before any run when the CPU is short: a
            # fork bomb or a busy loop must not delay the answers, or a deadline's kill.
            try:
                write_text(CGROUP_ROOT + "/cgroup.subtree_control", "+cpu")
                write_text(RUNS_CGROUP + "/cpu.weight", "10")
            except OSError:
                pass
        except OSError:
            self.ok = False

    def create(self):
        if not self.ok:
            return None
        with self.lock:
            self.sweep()
            self.n += 1
            path = f"{RUNS_CGROUP}/run-{self.n}-{time.monotonic_ns()}"
            try:
                os.mkdir(path)
                # The whole run is one unit for the OOM killer: a hog dies with its helpers.
                write_text(path + "/memory.oom.group", "1")
            except OSError:
                return None
            self.live.add(path)
            return path

    def release(self, path):
        """The shell of `path` has ended: the next sweep may remove it once it is empty."""
        with self.lock:
            self.live.discard(path)

    def kill(self, path):
        try:
            write_text(path + "/cgroup.kill", "1")
            return True
        except OSError:
            return False

    def events(self, path):
        out = {}
        for name in ("memory.events", "pids.events"):
            try:
                text = read_small(f"{path}/{name}")
            except OSError:
                continue
            for line in text.splitlines():
                k, _, v = line.partition(" ")
                try:
                    out[k] = out.get(k, 0) + int(v)
                except ValueError:
                    pass
        return out

    def sweep(self):
        """Removes the cgroups of ended runs (a run's survivors keep theirs)."""
        try:
            for d in os.listdir(RUNS_CGROUP):
                if d.startswith("run-") and f"{RUNS_CGROUP}/{d}" not in self.live:
                    try:
                        os.rmdir(f"{RUNS_CGROUP}/{d}")
                    except OSError:
                        pass
        except OSError:
            pass


class Shell:
    """A started shell that waits for its go signal: its process, cgroup and pipes."""

    def __init__(self, cgroups, env, cwd):
        os.makedirs(WORK_DIR, exist_ok=True)
        self.cgroups = cgroups
        self.cgroup = cgroups.create()
        self.cmd_file = None
        shell = shell_path()
        if env is None:
            env = default_env(shell)
        if not os.path.isdir(cwd):
            # The shell starts in /, and the command's own `cd` says what is wrong.
            cwd = "/"
        self.bash = shell.endswith("bash")
        script = SPARE_BASH if self.bash else SPARE_SH
        argv = [shell, "-c", script]
        procs = (self.cgroup + "/cgroup.procs") if self.cgroup else None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe()
        go_r, go_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            for fd in (out_r, out_w, err_r, err_w, in_r, in_w, go_r, go_w):
                os.close(fd)
            if self.cgroup:
                cgroups.release(self.cgroup)
            raise os_failure(e, "cannot start a shell")
        if pid == 0:
            try:
                # The shell joins its run's cgroup and gives up the agent's immunity to the
                # OOM killer before it becomes the user's.
                if procs:
                    fd = os.open(procs, os.O_WRONLY)
                    os.write(fd, b"0")
                    os.close(fd)
                fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)
                os.setsid()
                os.dup2(in_r, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                os.dup2(go_r, 3)
                os.closerange(4, 65536)
                os.chdir(cwd)
                # What the agent ignores would stay ignored across exec.
                for s in IGNORED_SIGNALS:
                    signal.signal(s, signal.SIG_DFL)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        for fd in (out_w, err_w, in_r, go_r):
            os.close(fd)
        self.pid = pid
        self.out_r, self.err_r, self.in_w, self.go_w = out_r, err_r, in_w, go_w
        self.cwd = cwd

    def alive(self):
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            return pid == 0
        except ChildProcessError:
            return False

    def go(self, cmd, cwd):
        text = cmd
        if cwd != self.cwd:
            text = f"cd -- {quote(cwd)} || exit 1\n{cmd}"
        data = text.encode()
        if len(data) <= INLINE_MAX and self.bash and b"\0" not in data:
            message = b"c" + data
        else:
            fd, self.cmd_file = make_temp()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            message = b"f" + self.cmd_file.encode() + (b"\0" if self.bash else b"\n")
        try:
            os.write(self.go_w, message)
        finally:
            os.close(self.go_w)
            self.go_w = None

    def finish(self):
        """After the shell has ended: its command file goes, its cgroup may be swept."""
        if self.cmd_file:
            try:
                os.unlink(self.cmd_file)
            except OSError:
                pass
            self.cmd_file = None
        if self.cgroup:
            self.cgroups.release(self.cgroup)

    def discard(self):
        """A spare that will not run: killed, its pipes closed."""
        if self.cgroup:
            self.cgroups.kill(self.cgroup)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        for fd in (self.out_r, self.err_r, self.in_w, self.go_w):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.finish()


def pidfd_of(pid):
    """A descriptor that polls readable when `pid` ends (Linux 5.3, Python 3.9), so that a
    run's end wakes the pump at once; None where there is none (the pump then polls)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def make_temp():
    n = 0
    while True:
        n += 1
        path = f"{WORK_DIR}/cmd-{os.getpid()}-{time.monotonic_ns()}-{n}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), path
        except FileExistsError:
            continue


class Run:
    def __init__(self, agent, req):
        self.agent = agent
        self.id = req["id"]
        self.req = req
        self.lock = threading.Lock()
        self.killed = False
        self.shell = None

    def signal(self, sig):
        """Sends `sig` to every process of the run (its cgroup's, else its process group)."""
        with self.lock:
            sh = self.shell
        if sh is None:
            return
        pids = []
        if sh.cgroup:
            try:
                with open(sh.cgroup + "/cgroup.procs") as f:
                    pids = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                pids = []
        if not pids:
            try:
                os.killpg(sh.pid, sig)
            except OSError:
                pass
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def kill(self):
        with self.lock:
            self.killed = True
            sh = self.shell
        if sh is None:
            return
        if sh.cgroup and self.agent.cgroups.kill(sh.cgroup):
            return
        try:
            os.killpg(sh.pid, signal.SIGKILL)
        except OSError:
            pass

    def execute(self):
        req = self.req
        timeout_s = max(int(req.get("timeout_ms", 5000)), 0) / 1000.0
        caps = [int(req.get("stdout_cap", 1 << 20)), int(req.get("stderr_cap", 1 << 20))]
        cwd = req.get("cwd") or DEFAULT_CWD
        env = req.get("env")
        sh = None
        if env is None:
            sh = self.agent.take_spare()
        if sh is None:
            sh = Shell(self.agent.cgroups, env, cwd)
        with self.lock:
            self.shell = sh
            killed = self.killed
        stdin_data = req.get("stdin")
        stdin_bytes = base64.b64decode(stdin_data) if stdin_data else b""
        started = time.monotonic()
        if killed:
            sh.discard()
            return self.answer(None, False, [False, False], {}, started)
        try:
            sh.go(req["cmd"], cwd)
        except OSError:
            # The shell died while it waited (a command of an earlier run killed it).
            sh.discard()
            sh = Shell(self.agent.cgroups, env, cwd)
            with self.lock:
                self.shell = sh
            sh.go(req["cmd"], cwd)
        in_w = sh.in_w

        # stdin is written by a thread of its own, so a command that does not read it never
        # blocks the output pump.
        def feed():
            try:
                view = memoryview(stdin_bytes)
                while view:
                    n = os.write(in_w, view[:CHUNK])
                    view = view[n:]
            except OSError:
                pass
            finally:
                os.close(in_w)

        if stdin_bytes:
            threading.Thread(target=feed, daemon=True).start()
        else:
            os.close(in_w)
        sent = [0, 0]
        truncated = [False, False]
        open_fds = {sh.out_r: 0, sh.err_r: 1}
        poller = select.poll()
        for fd in open_fds:
            poller.register(fd, select.POLLIN)
        pidfd = pidfd_of(sh.pid)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        timed_out = False
        status = None
        kill_at = None
        try:
            while True:
                now = time.monotonic()
                if not timed_out and not self.killed and now - started >= timeout_s:
                    timed_out = True
                    self.kill()
                if self.killed and kill_at is None:
                    kill_at = now
                if status is None:
                    try:
                        wpid, st = os.waitpid(sh.pid, os.WNOHANG)
                        if wpid == sh.pid:
                            status = st
                    except ChildProcessError:
                        status = 0
                    if status is not None and pidfd is not None:
                        # An ended process's pidfd stays readable: polled on, it would spin
                        # while a survivor holds the output open.
                        poller.unregister(pidfd)
                        os.close(pidfd)
                        pidfd = None
                if status is not None and not open_fds:
                    break
                if kill_at is not None and now - kill_at > DRAIN_GRACE_S and status is not None:
                    break
                if not open_fds and pidfd is None:
                    time.sleep(0.002)
                    continue
                wait_ms = 20 if status is None else 50
                if pidfd is not None:
                    # The shell's end wakes the poll; the deadline is what bounds it.
                    wait_ms = 1000
                if not timed_out and not self.killed:
                    wait_ms = max(1, min(wait_ms, int((started + timeout_s - now) * 1000) + 1))
                elif kill_at is not None:
                    wait_ms = min(wait_ms, 50)
                for fd, _ in poller.poll(wait_ms):
                    which = open_fds.get(fd)
                    if which is None:
                        continue
                    room = caps[which] - sent[which]
                    try:
                        if room <= 0:
                            # Past the cap: drained in the kernel, in big steps, so that a
                            # program printing gigabytes costs the agent little.
                            n = self.agent.discard(fd)
                            data = b"-" if n else b""
                        else:
                            data = os.read(fd, CHUNK)
                    except OSError:
                        data = b""
                    if not data:
                        poller.unregister(fd)
                        del open_fds[fd]
                        os.close(fd)
                        continue
                    if room <= 0:
                        truncated[which] = True
                        continue
                    if len(data) > room:
                        data = data[:room]
                        truncated[which] = True
                    sent[which] += len(data)
                    self.agent.port.send(
                        {"id": self.id, "ev": "out", "fd": which + 1, "data": b64(data)}
                    )
        finally:
            if pidfd is not None:
                os.close(pidfd)
        for fd in list(open_fds):
            os.close(fd)
        if status is None:
            try:
                _, status = os.waitpid(sh.pid, 0)
            except ChildProcessError:
                status = 0
        events = self.agent.cgroups.events(sh.cgroup) if sh.cgroup else {}
        if sh.cgroup and (timed_out or self.killed):
            # What a deadline or a cancel leaves alive in the run's cgroup dies with it; a run
            # that ended by itself keeps the processes it left behind (a server started with
            # `nohup ... &`), as a machine would.
            self.agent.cgroups.kill(sh.cgroup)
        sh.finish()
        return self.answer(status, timed_out, truncated, events, started)

    def answer(self, status, timed_out, truncated, events, started):
        exit_code = None
        sig = None
        if status is not None:
            if os.WIFEXITED(status):
                exit_code = os.WEXITSTATUS(status)
            elif os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                exit_code = 128 + sig
        return {
            "id": self.id,
            "ok": True,
            "exit_code": exit_code,
            "signal": sig,
            "timed_out": timed_out,
            "cancelled": self.killed and not timed_out,
            "truncated": {"stdout": truncated[0], "stderr": truncated[1]},
            "oom_kill": events.get("oom_group_kill", 0) > 0 or events.get("oom_kill", 0) > 0,
            "pids_max": events.get("max", 0) > 0,
            "duration_ms": int((time.monotonic() - started) * 1000),
        }


class Workers:
    """Threads kept for the work that must not hold up the reader (runs, file requests):
    starting a thread per request costs milliseconds under emulation, handing work to an idle
    one a fraction of that. A thread is added only when none is idle, so requests in flight
    never wait for each other."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.idle = 0

    def submit(self, fn, *args):
        with self.lock:
            spawn = self.idle == 0
            if not spawn:
                self.idle -= 1
        self.jobs.put((fn, args))
        if spawn:
            threading.Thread(target=self.work, daemon=True).start()

    def work(self):
        while True:
            fn, args = self.jobs.get()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - each job answers for itself; the thread stays
                pass
            with self.lock:
                self.idle += 1


class Agent:
    def __init__(self, port):
        self.port = port
        self.cgroups = Cgroups()
        self.runs = {}
        self.runs_lock = threading.Lock()
        self.devnull = None
        self.spare = None
        self.spare_pending = False
        self.spare_lock = threading.Lock()
        self.spare_ready = threading.Event()
        self.workers = Workers()

    def discard(self, fd):
        """Drops what the pipe `fd` holds (up to 1 MiB); the number of bytes, 0 at its end."""
        if self.devnull is None:
            self.devnull = os.open("/dev/null", os.O_WRONLY)
        try:
            return os.splice(fd, self.devnull, 1 << 20)
        except (AttributeError, OSError):
            return len(os.read(fd, 1 << 20))

    def make_spare(self):
        """Starts the next spare shell, unless one is there or on its way."""
        if self.reserve_spare():
            self.fill_spare()

    def reserve_spare(self):
        """Marks the next spare as on its way (True), unless one is there or on its way: a
        run that comes meanwhile waits for it rather than start a second shell beside it."""
        with self.spare_lock:
            if self.spare is not None or self.spare_pending:
                return False
            self.spare_pending = True
            self.spare_ready.clear()
            return True

    def fill_spare(self):
        sh = None
        try:
            sh = Shell(self.cgroups, None, DEFAULT_CWD)
        except Exception:  # noqa: BLE001 - no spare: runs start their own shell
            sh = None
        with self.spare_lock:
            self.spare = sh
            self.spare_pending = False
            self.spare_ready.set()

    def take_spare(self):
        """The spare shell, waiting for one on its way (starting another would cost as
        much); None when there is none."""
        with self.spare_lock:
            pending = self.spare_pending
        if pending:
            self.spare_ready.wait(10)
        with self.spare_lock:
            sh, self.spare = self.spare, None
        if sh is not None and not sh.alive():
            sh.discard()
            sh = None
        return sh

    def settle_spare(self):
        """Waits until the spare shell sits in its read of the go pipe: a machine saved now
        restores with a shell that has nothing left to load."""
        self.make_spare()
        self.spare_ready.wait(30)
        with self.spare_lock:
            sh = self.spare
        if sh is None:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{sh.pid}/syscall") as f:
                    # read(2) is system call 0 on x86-64 (the go pipe, which bash's `read`
                    # has moved to its standard input).
                    if f.read().split(" ", 1)[0] == "0":
                        return
            except OSError:
                return
            time.sleep(0.02)

    def serve(self):
        self.workers.submit(self.make_spare)
        for line in self.port.lines():
            try:
                req = json.loads(line)
            except ValueError:
                # A fragment left over from a host that went away mid-line: skip it.
                continue
            if not isinstance(req, dict) or "id" not in req:
                continue
            op = req.get("op")
            if op == "run":
                run = Run(self, req)
                with self.runs_lock:
                    self.runs[req["id"]] = run
                self.workers.submit(self.run_thread, run)
            elif op in ("write", "read", "prepare", "list", "remove", "walk"):
                # These may take long: off the reader, so a ping or a cancel still gets
                # through.
                self.workers.submit(self.answer, req)
            else:
                self.answer(req)

    def run_thread(self, run):
        try:
            answer = run.execute()
        except Failure as f:
            answer = {"id": run.id, "ok": False, "error": str(f), "errno": f.err}
        except Exception as e:  # noqa: BLE001 - the host must get an answer, whatever failed
            answer = {"id": run.id, "ok": False, "error": f"agent: {e!r}"}
        with self.runs_lock:
            self.runs.pop(run.id, None)
        # The next run's shell is started right after this answer, while the host reads it;
        # marked as on its way before, so that a run the host sends at once waits for it.
        reserved = self.reserve_spare()
        self.port.send(answer)
        if reserved:
            self.fill_spare()

    def answer(self, req):
        try:
            result = self.handle(req)
            result["id"] = req["id"]
            result["ok"] = True
        except Failure as f:
            result = {"id": req["id"], "ok": False, "error": str(f), "errno": f.err}
        except Exception as e:  # noqa: BLE001
            result = {"id": req["id"], "ok": False, "error": f"agent: {e!r}"}
        self.port.send(result)

    def handle(self, req):
        op = req.get("op")
        if op == "ping":
            return {"agent": PROTOCOL, "pid": os.getpid()}
        if op == "prepare":
            self.settle_spare()
            os.sync()
            return {}
        if op == "thaw":
            return self.thaw(req)
        if op == "cancel":
            with self.runs_lock:
                run = self.runs.get(req.get("run"))
            if run:
                run.kill()
            return {"found": run is not None}
        if op == "signal":
            with self.runs_lock:
                run = self.runs.get(req.get("run"))
            if run:
                run.signal(int(req.get("signal", signal.SIGTERM)))
            return {"found": run is not None}
        if op == "write":
            return self.write(req)
        if op == "read":
            return self.read(req)
        if op in FS_OPS:
            return FS_OPS[op](req)
        if op == "status":
            info = meminfo()
            return {
                "mem_total": info.get("MemTotal", 0),
                "mem_available": info.get("MemAvailable", info.get("MemFree", 0)),
                "uptime_ms": uptime_ms(),
            }
        raise Failure(f"unknown op {op!r}")

    def thaw(self, req):
        # A restored machine wakes with the clock and the random state it was saved with:
        # every restore of one saved machine would otherwise hand out the same random numbers.
        if "time_ns" in req:
            try:
                time.clock_settime_ns(time.CLOCK_REALTIME, int(req["time_ns"]))
            except OSError:
                pass
        seed = base64.b64decode(req.get("seed") or "")
        if seed:
            try:
                with open("/dev/urandom", "wb", buffering=0) as f:
                    arg = struct.pack("ii", len(seed) * 8, len(seed)) + seed
                    fcntl.ioctl(f.fileno(), RNDADDENTROPY, arg)
                    fcntl.ioctl(f.fileno(), RNDRESEEDCRNG)
            except OSError:
                with open("/dev/urandom", "wb", buffering=0) as f:
                    f.write(seed)
        if req.get("rw"):
            remount_rw()
        return {}

    def write(self, req):
        path = req["path"]
        data = base64.b64decode(req.get("data") or "")
        mode = int(req.get("mode", 0o644))
        append = bool(req.get("append"))
        parent = os.path.dirname(path)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
            fd = os.open(path, flags, mode)
            try:
                if not append:
                    os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
        except OSError as e:
            raise os_failure(e, path)
        return {"size": size}

    def read(self, req):
        path = req["path"]
        offset = int(req.get("offset", 0))
        length = int(req.get("length", 1 << 20))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                if st.st_mode & 0o170000 == 0o040000:
                    raise Failure(f"EISDIR: is a directory: {path}", "EISDIR")
                if st.st_mode & 0o170000 != 0o100000:
                    raise Failure(f"EINVAL: not a regular file: {path}", "EINVAL")
                data = os.pread(fd, length, offset)
            finally:
                os.close(fd)
        except OSError as e:
            raise os_failure(e, path)
        return {"data": b64(data), "size": st.st_size, "eof": offset + len(data) >= st.st_size}


def kind_of(mode):
    if stat_mod.S_ISREG(mode):
        return "file"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    return "other"


def entry_of(name, st):
    kind = kind_of(st.st_mode)
    return {"name": name, "kind": kind, "size": 0 if kind == "dir" else st.st_size}


def fs_stat(req):
    path = req["path"]
    try:
        st = os.lstat(path)
    except OSError as e:
        raise os_failure(e, path)
    name = os.path.basename(path.rstrip("/")) or "/"
    return entry_of(name, st)


def fs_list(req):
    path = req["path"]
    entries = []
    try:
        # A symlink to a directory is listed as the directory (as `ls` does).
        with os.scandir(path) as it:
            for d in it:
                try:
                    entries.append(entry_of(d.name, d.stat(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError as e:
        raise os_failure(e, path)
    entries.sort(key=lambda e: e["name"])
    return {"entries": entries}


def fs_mkdir(req):
    path = req["path"]
    try:
        if os.path.isdir(path):
            return {"created": False}
        os.makedirs(path)
    except OSError as e:
        raise os_failure(e, path)
    return {"created": True}


def fs_rename(req):
    src, dst = req["from"], req["to"]
    try:
        os.rename(src, dst)
    except OSError as e:
        raise os_failure(e, src)
    return {}


def fs_remove(req):
    path = req["path"]
    try:
        st = os.lstat(path)
        if not stat_mod.S_ISDIR(st.st_mode):
            os.unlink(path)
        elif req.get("recursive"):
            # Symlinks inside are removed, never followed.
            shutil.rmtree(path)
        else:
            os.rmdir(path)
    except OSError as e:
        raise os_failure(e, e.filename or path)
    return {}


def fs_walk(req):
    root = req["root"]
    limit = int(req.get("max", 100000))
    seen = 0
    out = []
    cut = False
    stack = [""]
    while stack and not cut:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel) if rel else root)
        except OSError:
            continue
        with it:
            for d in it:
                seen += 1
                if seen > limit:
                    cut = True
                    break
                path = rel + "/" + d.name if rel else d.name
                try:
                    st = d.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = kind_of(st.st_mode)
                if kind == "dir":
                    stack.append(path)
                elif kind in ("file", "symlink"):
                    out.append({"path": path, "kind": kind, "size": st.st_size if kind == "file" else 0})
    return {"entries": out, "cut": cut}


FS_OPS = {
    "stat": fs_stat,
    "list": fs_list,
    "mkdir": fs_mkdir,
    "rename": fs_rename,
    "remove": fs_remove,
    "walk": fs_walk,
}


def load_libc():
    """libc for mount(2), loaded once at start (before the machine is saved): finding it at
    a restore (`ctypes.util.find_library` runs ldconfig) would cost most of the restore under
    emulation."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        try:
            return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except (OSError, TypeError):
            return None


LIBC = None


def remount_rw():
    """The root file system read-write: with mount(2) directly (a `mount` process costs a
    noticeable part of a restore under emulation), else with mount(8)."""
    try:
        if LIBC is not None and LIBC.mount(None, b"/", None, MS_REMOUNT, None) == 0:
            return
    except (OSError, AttributeError):
        pass
    rc = os.spawnv(os.P_WAIT, "/bin/mount", ["mount", "-o", "remount,rw", "/"])
    if rc != 0:
        raise Failure("cannot remount / read-write")


def main():
    global LIBC
    LIBC = load_libc()
    path = find_port()
    if path is None:
        print("wasmsand-agent: no virtio-serial port named " + PORT_NAME, file=sys.stderr)
        time.sleep(5)
        return 1
    # A `kill -TERM -1` or `pkill python3` from a command must not end the agent; a closed
    # pipe is an error to handle, not a death.
    for s in IGNORED_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    Agent(Port(path)).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
