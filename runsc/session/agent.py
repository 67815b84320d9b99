# The agent of a conversation sandbox. It is the sandbox's first process (PID 1, guarded: the
# code can't signal, trace or read it) and starts each run's process itself, so a run costs no
# runsc exec. It talks to the host over fd 3, a Unix socket:
#
#   host -> agent: one JSON object a line:
#     {"op": "run", "id": N, "args": [...], "env": [...], "stdin": "..."}  start a run's process
#     {"op": "kill", "id": N, "mark": "NAME=VALUE"}  kill run N's process group and every
#                                                     process whose environment holds mark
#   agent -> host: "ready\n" once, then frames: kind (1 byte), id (4 bytes), length (4 bytes,
#   big-endian), payload. Kinds: "o" stdout, "e" stderr, "x" exit status (ASCII; 128+signal
#   for a signal), "f" the process could not start (a message).
#
# A run's process starts in /work in a session of its own; all it printed is sent before its
# exit status. The agent also reaps orphans (as init must), so no process stays a zombie.
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import threading

CTL = 3
MAXFRAME = 64 << 10


def main():
    # Not dumpable: /proc/1's files become root's, out of reach of the code (same user as us).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass
    os.set_inheritable(CTL, False)
    ctl = socket.socket(fileno=CTL)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    send_lock = threading.Lock()

    def send(kind, rid, data=b""):
        with send_lock:
            for i in range(0, max(len(data), 1), MAXFRAME):
                chunk = data[i:i + MAXFRAME]
                ctl.sendall(struct.pack(">cII", kind, rid, len(chunk)) + chunk)

    ctl.sendall(b"ready\n")
    poll = select.poll()
    poll.register(CTL, select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    pids = {}  # pid -> run id
    streams = {}  # fd -> (run id, kind)
    owned = {}  # run id -> its fds still open
    buf = b""

    def close_fd(fd):
        streams.pop(fd, None)
        try:
            poll.unregister(fd)
        except KeyError:
            pass
        os.close(fd)

    def forward(fd, drain):
        rid, kind = streams[fd]
        while True:
            try:
                data = os.read(fd, MAXFRAME)
            except BlockingIOError:
                return
            if not data:
                close_fd(fd)
                owned.get(rid, set()).discard(fd)
                return
            send(kind, rid, data)
            if not drain:
                return

    def start(req):
        rid = int(req["id"])
        fds = []
        try:
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            fds = [in_r, in_w, out_r, out_w, err_r, err_w]
            env = dict(e.split("=", 1) for e in req["env"] if "=" in e)
            args = req["args"]
            pid = os.posix_spawn(args[0], args, env, setsid=True,
                                 setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD),
                                 setsigmask=(),
                                 file_actions=[(os.POSIX_SPAWN_DUP2, in_r, 0),
                                               (os.POSIX_SPAWN_DUP2, out_w, 1),
                                               (os.POSIX_SPAWN_DUP2, err_w, 2)])
        except Exception as e:
            for fd in fds:
                os.close(fd)
            send(b"f", rid, str(e).encode())
            return
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        pids[pid] = rid
        owned[rid] = {out_r, err_r}
        for fd, kind in ((out_r, b"o"), (err_r, b"e")):
            os.set_blocking(fd, False)
            streams[fd] = (rid, kind)
            poll.register(fd, select.POLLIN)
        stdin = req.get("stdin", "").encode()

        def feed():
            try:
                view = memoryview(stdin)
                while view:
                    view = view[os.write(in_w, view):]
            except OSError:
                pass
            finally:
                os.close(in_w)

        threading.Thread(target=feed, daemon=True).start()

    def kill(req):
        rid = int(req["id"])
        for pid, r in list(pids.items()):
            if r == rid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        mark = req.get("mark", "").encode()
        if not mark:
            return
        seen = set()
        for _ in range(100):
            new = [p for p in marked(mark) if p not in seen]
            if not new:
                break
            for p in new:
                seen.add(p)
                try:
                    os.kill(p, signal.SIGSTOP)
                except OSError:
                    pass
        for p in seen:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass

    def reap():
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            rid = pids.pop(pid, None)
            if rid is None:
                continue  # an orphan, reaped as init must
            for fd in list(owned.pop(rid, ())):
                if fd in streams:
                    forward(fd, True)
                if fd in streams:
                    close_fd(fd)
            code = os.waitstatus_to_exitcode(status)
            send(b"x", rid, str(128 - code if code < 0 else code).encode())

    while True:
        for fd, _ in poll.poll():
            if fd == CTL:
                data = os.read(CTL, 1 << 16)
                if not data:
                    sys.exit(0)  # the host is gone
                buf += data
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    try:
                        req = json.loads(line)
                        if req.get("op") == "run":
                            start(req)
                        elif req.get("op") == "kill":
                            kill(req)
                    except Exception as e:
                        print("agent:", repr(e), file=sys.stderr)
            elif fd == wake_r:
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                reap()
            elif fd in streams:
                forward(fd, False)
        # A child may have ended between the reap and the poll: the wake-up pipe catches it,
        # and so does this.
        reap()


def marked(mark):
    out = []
    me = os.getpid()
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in (1, me):
            continue
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if mark in env:
            out.append(int(p))
    return out


main()
