# The agent of a conversation sandbox. It is the sandbox's first process (PID 1, guarded: the
# code can't signal, trace or read it) and starts each run's process itself, so a run costs no
# runsc exec. It talks to the host over its stdin, a Unix socket (a checkpointed sandbox is
# restored with new standard files and no others: this way, the restored agent's socket is the
# new host's):
#
#   host -> agent: one JSON object a line:
#     {"op": "run", "id": N, "args": [...], "env": [...], "stdin": "..."}  start a run's process
#     {"op": "kill", "id": N, "mark": "NAME=VALUE"}  kill every process of run N, and every
#                                                     process whose environment holds mark
#     {"op": "py", "id": N, "code": "...", "mark": "NAME=VALUE", "args": [...], "env": [...],
#      "reset": false}  run code as a cell of the live interpreter (kernel.py), started first
#                        with args and env when there is none (or reset asks for a new one)
#     {"op": "interrupt", "id": N}  KeyboardInterrupt in cell N (its processes are killed)
#   agent -> host: "ready\n" once, then frames: kind (1 byte), id (4 bytes), length (4 bytes,
#   big-endian), payload. Kinds: "o" stdout, "e" stderr, "x" exit status (ASCII; 128+signal
#   for a signal), "f" the process could not start (a message), "v" the value of a cell's last
#   expression (repr, before its "x"), "r" the interpreter ended during the cell (its exit
#   status, before its "x"): its variables are gone, and the next cell starts a new one, "d" a
#   piece of an image the cell shows (its bytes, in one or more frames) and "i" its end (its
#   MIME type), in order with the cell's "o" and "e".
#
# The interpreter is a run of its own, under a shepherd, that lives from cell to cell; one cell
# runs at a time (the host sends the next once the last ended). When a cell ends, every process
# it left below the interpreter's shepherd is killed: a cell's processes end with the cell. The
# interpreter itself is stopped (SIGSTOP) between cells, so threads the code left in it do no
# work while no cell runs; it is continued when the next cell comes. A kill of a cell kills the
# interpreter.
#
# A run's processes end with the run. Each run has a shepherd: a fork of the agent that is a
# child subreaper (PR_SET_CHILD_SUBREAPER), so every process the run starts stays below it
# however it leaves its parent (&, nohup, setsid, a double fork). The shepherd starts the run's
# process in /work in a session of its own and waits for it; when it exits, the shepherd kills
# every process left below it (stopping them first, so none can fork away), reaps them, and
# exits with the run's status; all the run printed is sent before that status. A kill stops
# and kills the processes below the shepherd, which then does the same. The shepherd runs as
# the code's user, so the code can kill it: its processes then come to the agent, which carries
# on with the run's process (the shepherd said which it is) and, when the run ends, kills every
# process that came to it that way. A fork costs tens of milliseconds in gVisor: the agent keeps
# one shepherd forked ahead (made while no run goes on) that waits for its run's args on a pipe.
# The agent also reaps orphans (as init must), so no process stays a zombie.
#
# Run as "python3 -c AGENT shepherd ARGS..." (a run started by runsc exec), the program is that
# run's shepherd on its own stdin, stdout and stderr; as "python3 -c AGENT kill NAME=VALUE", it
# kills the runs marked so: every process below their shepherds, and every process whose
# environment holds the mark but the shepherds, which then end as above.
import base64
import binascii
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys

CTL = -1  # the host's socket, moved off fd 0 by main
MAXFRAME = 64 << 10
MAXDONE = 8 << 20  # the longest line the interpreter may send (an image's): more, and it is not the kernel talking
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
SPARE = -1  # the run id of the shepherd made ahead
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)
KERNEL = -2  # the "run id" of the live interpreter's shepherd
GONE = -3  # that of an interpreter stopped for a reset, reaped and forgotten


def prctl(option, arg):
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except Exception:
        return -1


def main():
    if sys.argv[1:2] == ["shepherd"]:
        shepherd(sys.argv[2:], dict(os.environ), None, None)
    if sys.argv[1:2] == ["kill"]:
        kill_marked(sys.argv[2].encode())
        return
    # Not dumpable: /proc/1's files become root's, out of reach of the code (same user as us).
    # The shepherds, forks of the agent, are not dumpable either.
    prctl(PR_SET_DUMPABLE, 0)
    # The socket moves off fd 0 (close-on-exec; the shepherds close it too), and fd 0 becomes
    # /dev/null: no process but the agent holds it. A restore gives it a new host socket in
    # place of the old one, whichever fd holds it.
    global CTL
    CTL = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    ctl = socket.socket(fileno=CTL)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(kind, rid, data=b""):
        for i in range(0, max(len(data), 1), MAXFRAME):
            chunk = data[i:i + MAXFRAME]
            ctl.sendall(struct.pack(">cII", kind, rid, len(chunk)) + chunk)

    ctl.sendall(b"ready\n")
    poll = select.poll()
    poll.register(CTL, select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    pids = {}  # pid -> run id: the shepherds, and the runs' processes whose shepherd was killed
    runs = {}  # run id -> Run
    streams = {}  # fd -> (run id, kind)
    notes = {}  # fd -> run id: what a shepherd tells the agent
    feeds = {}  # fd -> what is left to write of a run's stdin
    spare = []  # the shepherd made ahead, waiting for a run: none or one
    kern = []  # the live interpreter: none or one Kernel
    buf = b""

    class Run:
        def __init__(self, shepherd, fds, note):
            self.shepherd = shepherd
            self.main = 0  # the run's process, once the shepherd said
            self.adopted = False  # the shepherd was killed: the agent waits for main itself
            self.fds = fds
            self.note = note
            self.failed = b""

    def close_fd(fd):
        for k in kern:
            k.open.discard(fd)
        streams.pop(fd, None)
        notes.pop(fd, None)
        feeds.pop(fd, None)
        try:
            poll.unregister(fd)
        except KeyError:
            pass
        os.close(fd)

    def forward(fd, drain):
        rid, kind = streams[fd]
        while True:
            if rid == KERNEL or rid == 0:
                rid = kern[0].rid if kern else 0
            try:
                data = os.read(fd, MAXFRAME)
            except BlockingIOError:
                return
            if not data:
                close_fd(fd)
                if rid in runs:
                    runs[rid].fds.discard(fd)
                return
            if rid:
                send(kind, rid, data)  # the interpreter's output between cells goes nowhere
            if not drain:
                return

    def read_note(fd):
        if notes[fd] == KERNEL:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                return
            if data.startswith(b"p") and kern and kern[0].note == fd:
                try:
                    kern[0].main = int(data[1:].split(b"\n")[0])
                except ValueError:
                    pass
            elif data.startswith(b"f") and kern and kern[0].note == fd:
                kern[0].failed = data[1:]
            if not data:
                close_fd(fd)
            return
        run = runs.get(notes[fd])
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        if not data:
            close_fd(fd)
            return
        if run is None:
            return
        if data.startswith(b"p"):
            try:
                run.main = int(data[1:].split(b"\n")[0])
            except ValueError:
                pass
        elif data.startswith(b"f"):
            run.failed = data[1:]

    def feed(fd):
        view = feeds[fd]
        try:
            view = view[os.write(fd, view[:1 << 16]):]
        except BlockingIOError:
            return
        except OSError:
            view = b""
        if view:
            feeds[fd] = view
        else:
            close_fd(fd)

    def fork_shepherd():
        # A shepherd waiting for its run: it reads the run's args and environment (JSON) from
        # its request pipe until EOF, then starts it. Forking costs tens of milliseconds in
        # gVisor, so the agent keeps one ready (spare), made while no run goes on. It has one
        # pipe more, which becomes the run's fd 3 when the run is the interpreter ("kernel" in
        # its order) and is closed otherwise.
        fds = []
        try:
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            note_r, note_w = os.pipe()
            req_r, req_w = os.pipe()
            fds = [in_r, in_w, out_r, out_w, err_r, err_w, note_r, note_w, req_r, req_w]
            done_r, done_w = os.pipe()
            fds += [done_r, done_w]
            pid = os.fork()
        except Exception:
            for fd in fds:
                os.close(fd)
            raise
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                # The agent's other files (its socket, other runs' pipes) stay out of reach.
                keep = (in_r, out_w, err_w, note_w, req_r, done_w)
                for fd in [int(f) for f in os.listdir("/proc/self/fd")]:
                    if fd > 2 and fd not in keep:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                data = b""
                while True:
                    chunk = os.read(req_r, 1 << 16)
                    if not chunk:
                        break
                    data += chunk
                os.close(req_r)
                if not data:
                    os._exit(0)  # the agent is gone
                req = json.loads(data)
                env = dict(e.split("=", 1) for e in req["env"] if "=" in e)
                run_fds = (in_r, out_w, err_w)
                if req.get("kernel"):
                    run_fds += (done_w,)
                else:
                    os.close(done_w)
                shepherd(req["args"], env, run_fds, note_w)
            finally:
                os._exit(127)
        for fd in (in_r, out_w, err_w, note_w, req_r, done_w):
            os.close(fd)
        pids[pid] = SPARE
        return Spare(pid, in_w, out_r, err_r, note_r, req_w, done_r)

    def drop_spare():
        sp = spare.pop()
        for fd in (sp.in_w, sp.out_r, sp.err_r, sp.note_r, sp.req_w, sp.done_r):
            os.close(fd)

    def start(req):
        rid = int(req["id"])
        try:
            sp = spare.pop() if spare else fork_shepherd()
            order = {"args": req["args"], "env": req["env"]}
        except Exception as e:
            send(b"f", rid, str(e).encode())
            return
        hand_over(sp, order, rid)
        os.close(sp.done_r)
        runs[rid] = Run(sp.pid, {sp.out_r, sp.err_r}, sp.note_r)
        stdin = req.get("stdin", "").encode()
        if stdin:
            os.set_blocking(sp.in_w, False)
            feeds[sp.in_w] = memoryview(stdin)
            poll.register(sp.in_w, select.POLLOUT)
        else:
            os.close(sp.in_w)

    def hand_over(sp, order, rid):
        # Give the shepherd sp its run's order, and hear its output and notes as run rid's.
        try:
            view = memoryview(json.dumps(order).encode())
            while view:
                view = view[os.write(sp.req_w, view):]
        except OSError:
            pass  # the shepherd is gone: its end says so
        os.close(sp.req_w)
        pids[sp.pid] = rid
        for fd, kind in ((sp.out_r, b"o"), (sp.err_r, b"e")):
            os.set_blocking(fd, False)
            streams[fd] = (rid, kind)
            poll.register(fd, select.POLLIN)
        os.set_blocking(sp.note_r, False)
        notes[sp.note_r] = rid
        poll.register(sp.note_r, select.POLLIN)

    def start_kernel(req):
        sp = spare.pop() if spare else fork_shepherd()
        hand_over(sp, {"args": req["args"], "env": req["env"], "kernel": True}, KERNEL)
        k = Kernel(sp)
        os.set_blocking(sp.done_r, False)
        poll.register(sp.done_r, select.POLLIN)
        os.set_blocking(sp.in_w, False)
        kern.append(k)

    def kclose(k, fd):
        if fd in k.open:
            close_fd(fd)

    def stop_kernel(k):
        # For a reset: the interpreter and all below its shepherd go; its end is not waited for.
        end(lambda parents: below([k.pid], parents))
        for fd in list(k.open):
            kclose(k, fd)
        pids[k.pid] = GONE
        kern.remove(k)

    def py(req):
        rid = int(req["id"])
        if req.get("reset") and kern and not kern[0].rid:
            stop_kernel(kern[0])
        if not kern:
            try:
                start_kernel(req)
            except Exception as e:
                send(b"f", rid, ("starting the interpreter: %s" % e).encode())
                return
        k = kern[0]
        if k.rid:
            send(b"f", rid, b"the interpreter is running another cell")
            return
        k.rid = rid
        if k.main:
            try:
                os.kill(k.main, signal.SIGCONT)
            except OSError:
                pass
        body = json.dumps({"code": req.get("code", ""), "mark": req.get("mark", "")}).encode()
        k.feed = memoryview(struct.pack(">I", len(body)) + body)
        feed_kernel(k)
        if k.feed and k.cells in k.open:
            poll.register(k.cells, select.POLLOUT)

    def feed_kernel(k):
        try:
            k.feed = k.feed[os.write(k.cells, k.feed[:1 << 16]):]
        except BlockingIOError:
            return
        except OSError:
            k.feed = memoryview(b"")  # the interpreter is gone: its end says so
        if not k.feed:
            try:
                poll.unregister(k.cells)
            except KeyError:
                pass

    def leftovers(k):
        # What a cell left: every process below the interpreter's shepherd but the interpreter,
        # and those that came to the agent from a killed shepherd.
        def targets(parents):
            return [p for p in below([k.pid], parents) + strays(parents) if p != k.main]
        return targets

    def kernel_done(k):
        try:
            data = os.read(k.done, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            kclose(k, k.done)  # the interpreter is ending: its reap ends the cell
            return
        k.buf += data
        if len(k.buf) > MAXDONE and b"\n" not in k.buf:
            # The code wrote to the interpreter's own pipe: the interpreter can't be trusted to
            # say when a cell ends, so it goes (its end ends the cell).
            k.buf = b""
            end(lambda parents: below([k.pid], parents))
            return
        while b"\n" in k.buf:
            line, _, k.buf = k.buf.partition(b"\n")
            rid = k.rid
            if not rid:
                continue
            try:
                res = json.loads(line)
            except ValueError:
                res = None
            shown = res.get("display") if isinstance(res, dict) else None
            if isinstance(shown, dict):
                # An image the cell shows: it goes on. The interpreter wrote it once what it
                # printed before was read (and so sent), and prints on once it is read: what
                # comes now on stdout and stderr is later, and waits.

                try:
                    data = base64.b64decode(shown.get("data", ""), validate=True)
                    mime = str(shown.get("mime_type", ""))
                except (binascii.Error, TypeError, ValueError):
                    continue
                send(b"d", rid, data)
                send(b"i", rid, mime.encode("utf-8", "replace"))
                continue
            for fd in (k.out, k.err):
                if fd in streams:
                    forward(fd, True)
            k.rid = 0
            try:
                code, value = int(res.get("exit", 1)), res.get("value")
            except (TypeError, AttributeError, ValueError):
                code, value = 1, None
            if isinstance(value, str):
                send(b"v", rid, value.encode("utf-8", "replace"))
            send(b"x", rid, str(code).encode())
            # After the cell's end is sent, off its path; before the agent reads the next
            # request, so no later run sees what this cell left.
            end(leftovers(k))
            if k.main:
                try:
                    os.kill(k.main, signal.SIGSTOP)  # no work between cells
                except OSError:
                    pass

    def kernel_ended(k, status):
        # The interpreter's shepherd ended: the interpreter with it. The cell that ran (if one
        # did) gets what was printed, then "r" and its status.
        for fd in (k.out, k.err):
            if fd in streams:
                forward(fd, True)
        rid = k.rid
        k.rid = 0
        for fd in list(k.open):
            kclose(k, fd)
        kern.remove(k)
        if not rid:
            return
        if k.failed:
            send(b"f", rid, b"starting the interpreter: " + k.failed)
            return
        code = os.waitstatus_to_exitcode(status)
        code = str(128 - code if code < 0 else code).encode()
        send(b"r", rid, code)
        send(b"x", rid, code)

    def interrupt(req):
        k = kern[0] if kern else None
        if k is None or k.rid != int(req["id"]):
            return
        end(leftovers(k))  # so a cell waiting for a process of its own goes on
        if k.main:
            try:
                os.kill(k.main, signal.SIGINT)
            except OSError:
                pass

    def strays(parents):
        # The processes that came to the agent from a killed shepherd, and theirs.
        me = os.getpid()
        roots = [p for p, pp in parents.items() if pp == me and p not in pids]
        return roots + below(roots, parents)

    def kill(req):
        rid = int(req["id"])
        run = runs.get(rid)
        if kern and kern[0].rid == rid:
            k = kern[0]
            end(lambda parents: below([k.pid], parents) + ([k.main] if k.main else []))
        if run is not None:
            def targets(parents):
                out = []
                if run.shepherd in pids:
                    out += below([run.shepherd], parents)
                if run.adopted:
                    out += [run.main] + below([run.main], parents) + strays(parents)
                return out
            end(targets)
            if run.shepherd in pids:
                try:
                    os.kill(run.shepherd, signal.SIGCONT)
                except OSError:
                    pass
        mark = req.get("mark", "").encode()
        if mark:
            end(lambda parents: marked(mark, parents))

    def finish(rid, status):
        run = runs.pop(rid)
        for fd in list(run.fds):
            if fd in streams:
                forward(fd, True)
            if fd in streams:
                close_fd(fd)
        if run.note in notes:
            read_note(run.note)
            if run.note in notes:
                close_fd(run.note)
        if run.adopted:
            end(strays)
        if run.failed:
            send(b"f", rid, run.failed)
            return
        code = os.waitstatus_to_exitcode(status)
        send(b"x", rid, str(128 - code if code < 0 else code).encode())

    def reap():
        ended = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            ended.append((pid, status))
        # Shepherds first: a killed one's run process may be in the same batch.
        ended.sort(key=lambda e: not (e[0] in pids and runs.get(pids[e[0]]) is not None
                                      and runs[pids[e[0]]].shepherd == e[0]))
        for pid, status in ended:
            rid = pids.pop(pid, None)
            if rid is None or rid == GONE:
                continue  # an orphan, reaped as init must, or a stopped interpreter
            if rid == KERNEL:
                k = next((k for k in kern if k.pid == pid), None)
                if k is not None:
                    if k.main and alive(k.main):
                        # The code killed the interpreter's shepherd: the interpreter goes too.
                        end(lambda parents: [k.main] + below([k.main], parents))
                    kernel_ended(k, status)
                continue
            if rid == SPARE:
                if spare and spare[0].pid == pid:
                    drop_spare()  # the code killed it: another is made
                continue
            run = runs.get(rid)
            if run is None:
                continue
            if pid == run.shepherd and os.WIFSIGNALED(status):
                # The code killed its shepherd: its processes came here. Wait for the run's
                # process, unless it ended already.
                if run.note in notes:
                    read_note(run.note)
                run.adopted = True
                if run.main and (any(p == run.main for p, _ in ended) or alive(run.main)):
                    pids[run.main] = rid
                    continue
            finish(rid, status)

    def busy():
        return runs or (kern and kern[0].rid)

    while True:
        events = poll.poll(0 if not spare and not busy() else None)
        if not events and not spare and not busy():
            try:
                spare.append(fork_shepherd())
            except Exception as e:
                print("agent: making a shepherd:", repr(e), file=sys.stderr)
                events = poll.poll()
        for fd, _ in events:
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
                        elif req.get("op") == "py":
                            py(req)
                        elif req.get("op") == "interrupt":
                            interrupt(req)
                    except Exception as e:
                        print("agent:", repr(e), file=sys.stderr)
            elif fd == wake_r:
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                reap()
            elif kern and fd == kern[0].done:
                kernel_done(kern[0])
            elif kern and fd == kern[0].cells:
                feed_kernel(kern[0])
            elif fd in streams:
                forward(fd, False)
            elif fd in notes:
                read_note(fd)
            elif fd in feeds:
                feed(fd)
        # A child may have ended between the reap and the poll: the wake-up pipe catches it,
        # and so does this.
        reap()


class Kernel:
    def __init__(self, sp):
        self.pid = sp.pid  # its shepherd
        self.main = 0  # the interpreter, once the shepherd said
        self.failed = b""
        self.cells, self.out, self.err, self.note, self.done = \
            sp.in_w, sp.out_r, sp.err_r, sp.note_r, sp.done_r
        self.open = {sp.in_w, sp.out_r, sp.err_r, sp.note_r, sp.done_r}
        self.rid = 0  # the cell that runs
        self.feed = memoryview(b"")
        self.buf = b""


class Spare:
    def __init__(self, pid, in_w, out_r, err_r, note_r, req_w, done_r):
        self.pid, self.in_w, self.out_r, self.err_r, self.note_r, self.req_w, self.done_r = \
            pid, in_w, out_r, err_r, note_r, req_w, done_r


def shepherd(args, env, fds, note):
    # The run's shepherd: start args, wait for it, then end every process left below us and
    # exit with its status. fds are the run's stdin, stdout and stderr (None: ours); note (an fd,
    # or None) hears "p<pid>" of the run's process, or "f<why>" when it could not start.
    code = 127
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        try:
            os.setsid()
        except OSError:
            pass
        actions = []
        if fds is not None:
            actions = [(os.POSIX_SPAWN_DUP2, fds[i], i) for i in range(len(fds))]
        try:
            main = os.posix_spawn(args[0], args, env, setsid=True, setsigdef=DEFAULT_SIGNALS,
                                  setsigmask=(), file_actions=actions)
        except Exception as e:
            if note is not None:
                os.write(note, b"f" + str(e).encode())
            else:
                os.write(2, ("%s: %s\n" % (args[0] if args else "", e)).encode())
            os._exit(127)
        if fds is not None:
            for fd in fds:
                os.close(fd)
        if note is not None:
            os.write(note, b"p%d\n" % main)
            os.close(note)
        status = None
        while status is None:
            signal.sigwait({signal.SIGCHLD})
            while True:
                try:
                    pid, st = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == main:
                    status = st
        me = os.getpid()
        end(lambda parents: below([me], parents))
        while True:
            # Reap what is left, killing again any process that slipped through.
            for p in below([me], processes()):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                break
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            code = 128 - code
    finally:
        os._exit(code)


def processes():
    # pid -> parent pid of every process we can see.
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                s = f.read()
            out[int(p)] = int(s[s.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def below(roots, parents):
    # The processes below roots (not roots themselves).
    children = {}
    for p, pp in parents.items():
        children.setdefault(pp, []).append(p)
    out, todo = [], list(roots)
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def end(targets):
    # Kill the processes targets(parents) names: stop them first, again until no new one
    # appears (a stopped process can't fork), then kill them all.
    me = os.getpid()
    seen = set()
    for _ in range(100):
        new = [p for p in targets(processes()) if p not in seen and p not in (1, me)]
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


def kill_marked(mark):
    # The shepherds started by runsc exec have no parent in the sandbox (0).
    parents = processes()
    shepherds = [p for p in marked(mark, parents) if parents[p] == 0]
    end(lambda ps: [p for p in marked(mark, ps) if p not in shepherds] + below(shepherds, ps))
    for p in shepherds:
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass


def marked(mark, parents):
    out = []
    for p in parents:
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if mark in env:
            out.append(p)
    return out


main()
