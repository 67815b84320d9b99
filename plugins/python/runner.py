# The python kind's runner: the first process of a sandbox. A child process of its own waits for
# one request (a JSON line) on fd 3 and runs the tool's code; this process reports how the child
# ended, and the answer goes back on fd 3 as one JSON line. What the code prints goes straight to
# the sandbox's stdout and stderr, which the host streams. It imports nothing heavy, so a sandbox
# made ready ahead of time waits cheaply — unless the pool asks it to preload modules (its
# arguments), which it imports before the fork so the run finds them loaded.
#
# This process is the sandbox's first process (PID 1): when it exits, the sandbox ends with every
# process in it. It watches the control socket and the clock while the child works: when the
# host's end of fd 3 closes (the plugin died, or dropped the sandbox) it stops everything at once,
# and once a request came it stops everything when the run's wall-clock limit has passed
# (answering "timeout" first), so no sandbox outlives its run or its plugin. The code runs in the
# child, which can't cancel that: init ignores the signals it has no handler for, and a process
# can't trace its ancestor.
#
# Once the child waits for its request it writes "ready" and a newline on fd 3: the host hands a
# sandbox out only after reading it. The child keeps fd 3 while the code runs and answers on it
# itself (fast); the channel is kept apart from stdout so that nothing printed is taken for the
# result, not hidden from the code, which can only misreport its own result through it.
#
# The code reaches the host through the module toolhost (see make_toolhost): toolhost.progress and
# toolhost.log write an event line on fd 3 as they are called, {"event": "progress", "fraction":
# float | null, "message": str} or {"event": "log", "level": str, "message": str}, before the
# answer. Those are the only events fd 3 carries: the plugin checks every line, takes nothing from
# it for stdout, stderr or another kind of event, and fails the run on a line it can't read.
#
# Request: {"mode": "run" | "check", "code": str, "args": object, "cpu_seconds": int, "seconds": int}
# Answer, one of:
#   {"ok": true, "result": <the JSON run(**args) returned>}   (mode run)
#   {"ok": true, "result": <JSON or null>, "content": [part, ...]}   (run returned toolhost.content)
#       part: {"type": "text" | "image" | "audio" | "resource", "text": str, "data": base64,
#              "mime_type": str, "uri": str}, with the fields its type has
#   {"ok": true}                                               (mode check)
#   {"error": "compile", "msg": str, "line": int | null}
#   {"error": "no_run"}
#   {"error": "exception", "last": str, "kind": "" | "memory" | "disk" | "network", "full": "" | "/tmp" | "/work"}
#   {"error": "bad_result", "msg": str}                        (msg: what is wrong, may be "")
#   {"error": "cpu"}
#   {"error": "timeout"}                                       (from this process)
#   {"error": "signal", "signal": int}
#   {"error": "exit", "status": int}
import _json
import _signal
import _thread
import binascii
import gc
import os
import resource
import select
import sys
import time

CONTROL = 3
# WALL_GRACE is how much longer than its seconds a run may take before this process stops it:
# a second more than the plugin's own timer (run.go's wallGrace), which normally stops it first.
WALL_GRACE = 2.0

# JSON through the C accelerator alone: the json package imports re, enum and functools, which
# cost every sandbox tens of milliseconds of CPU in gVisor before it is ready. These are what
# json.loads and json.dumps(allow_nan=False) do with their defaults.


def _constant(name):
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


_scan = _json.make_scanner(_ScanContext())


def _not_json(o):
    raise TypeError("%s is not JSON serializable" % type(o).__name__)


def json_loads(text):
    obj, _ = _scan(text, 0)
    return obj


def json_dumps(obj, allow_nan=True):
    enc = _json.make_encoder({}, _not_json, _json.encode_basestring_ascii, None, ": ", ", ", False, False, allow_nan)
    return "".join(enc(obj, 0))


def read_request():
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = os.read(CONTROL, 1 << 16)
        if not chunk:
            sys.exit(0)
        buf += chunk
    return json_loads(buf.decode())


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def main():
    for name in sys.argv[1:]:
        try:
            __import__(name)
        except Exception as e:  # noqa: BLE001 — any failure means the pool's preload is wrong
            print("preloading %s failed: %s: %s" % (name, type(e).__name__, e), file=sys.stderr, flush=True)
            sys.exit(1)
    # The child that will run the code is forked now, before the request comes, so a sandbox made
    # ready ahead of time has paid for the fork already. The child reads the request and writes
    # the answer on fd 3 itself (a relay through this process would wake it on the request's
    # path); it notes on a pipe that a request came, with its CPU and wall-clock limits, and that
    # it answered. This process reads the first note when it comes (the run's clock starts) and
    # the rest once the child has ended (so the code can't keep waking it), and answers for the
    # child when it ended without answering.
    # What exists now is never collected: the child's collections then leave the pages it
    # shares with this process alone (in gVisor each first write to a shared page is a fault).
    gc.freeze()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # A session of its own: signals the code sends to its process group never reach this
        # process, and the sandbox's seccomp filter refuses those that name it (PID 1).
        os.setsid()
        try:
            child(w)
        except SystemExit:
            pass
        except BaseException:  # noqa: B036 — the runner's own failure: say what it was
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        finally:
            os._exit(0)
    os.close(w)
    os.set_blocking(r, False)  # the code's own processes may hold the write end
    status, usage, notes = watch(pid, r)
    try:
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            notes += chunk
    except BlockingIOError:
        pass
    lines = notes.split(b"\n")
    if not lines[0].startswith(b"asked ") or b"answered" in lines[1:]:
        return  # no request came (the sandbox is being closed), or the child answered
    limit = int(lines[0].split()[1])
    cpu = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == _signal.SIGXCPU or (sig == _signal.SIGKILL and limit and cpu >= limit - 0.05):
            answer = {"error": "cpu"}
        else:
            answer = {"error": "signal", "signal": sig}
    else:
        answer = {"error": "exit", "status": os.waitstatus_to_exitcode(status)}
    write_all(CONTROL, (json_dumps(answer) + "\n").encode())


def stop_all():
    # Every other process of the sandbox, then this one: the sandbox ends with its first process.
    try:
        os.kill(-1, _signal.SIGKILL)
    finally:
        os._exit(0)


def watch(pid, r):
    # Waits for the child to end and returns its status, rusage and the notes read so far. Until
    # then it wakes only when the child notes that a request came (the run's clock starts), when
    # the host's end of the control socket closes once the request is in (stop everything), and
    # when the run's time is up (answer "timeout", stop everything). Before the request the child
    # itself is reading the socket: its end ends the child, and this process with it.
    poll = select.poll()
    poll.register(r, select.POLLIN)
    pidfd = os.pidfd_open(pid)
    poll.register(pidfd, select.POLLIN)
    notes, deadline = b"", None
    while True:
        timeout = None
        if deadline is not None:
            timeout = max(0, int((deadline - time.monotonic()) * 1000) + 1)
        events = poll.poll(timeout)
        for fd, ev in events:
            # The host writes nothing after the request, so the socket becomes readable only when
            # its end closes (gVisor reports that as POLLIN alone for a socket from the host).
            if fd == CONTROL and os.read(CONTROL, 1) == b"":
                stop_all()  # the host is gone, or gave up on this sandbox
            if fd == r:
                try:
                    chunk = os.read(r, 1 << 16)
                except BlockingIOError:
                    chunk = None
                notes += chunk or b""
                if chunk == b"":
                    poll.unregister(r)  # every writer is gone: the child's end shows it
                elif b"\n" in notes:
                    # The first line is the runner's ("asked <cpu> <seconds>"), written before
                    # the code ran; whatever the code writes after it is read only at the end.
                    poll.unregister(r)
                    first = notes.split(b"\n", 1)[0].split()
                    if first[:1] == [b"asked"] and len(first) == 3:
                        poll.register(CONTROL, select.POLLIN)
                        if int(first[2]) > 0:
                            deadline = time.monotonic() + int(first[2]) + WALL_GRACE
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done == pid:
            os.close(pidfd)
            return status, usage, notes
        if deadline is not None and time.monotonic() >= deadline:
            try:
                write_all(CONTROL, b'{"error": "timeout"}\n')
            finally:
                stop_all()


LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# MAX_MESSAGE bounds the message of one progress or log event, in characters.
MAX_MESSAGE = 64 << 10


def make_toolhost():
    # The module toolhost, as tool code imports it: events now (progress, log), and the parts of a
    # result (text, image, audio, resource, content). Arguments are checked here, so a mistake is
    # an exception at the line that made it.
    mod = type(sys)("toolhost")
    mod.__doc__ = "What a python tool tells toolhost: progress and log events, and content in its result."
    lock = _thread.allocate_lock()

    def send(event):
        line = (json_dumps(event) + "\n").encode()  # ASCII only: a message can't end the line
        with lock:
            write_all(CONTROL, line)

    def text_arg(fn, name, v):
        if not isinstance(v, str):
            raise TypeError("toolhost.%s: %s must be a str, not %s" % (fn, name, type(v).__name__))
        return v

    def message_arg(fn, v):
        text_arg(fn, "message", v)
        if len(v) > MAX_MESSAGE:
            raise ValueError("toolhost.%s: the message is %d characters; at most %d" % (fn, len(v), MAX_MESSAGE))
        return v

    def bytes_arg(fn, name, v):
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError("toolhost.%s: %s must be bytes, not %s" % (fn, name, type(v).__name__))
        return bytes(v)

    def mime_arg(fn, v, prefix):
        text_arg(fn, "mime_type", v)
        if "/" not in v or (prefix and not v.startswith(prefix)):
            want = "a MIME type such as " + (prefix + "png" if prefix else "text/plain")
            raise ValueError("toolhost.%s: mime_type must be %s, not %r" % (fn, want, v))
        return v

    def progress(fraction=None, message=""):
        """Reports how far the run has got, now: fraction from 0 to 1 (None: unknown), and a message."""
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
                raise TypeError("toolhost.progress: fraction must be a number from 0 to 1 or None, not %s" % type(fraction).__name__)
            if not 0 <= fraction <= 1:  # NaN fails this too
                raise ValueError("toolhost.progress: fraction must be from 0 to 1 (or None), not %r" % fraction)
            fraction = float(fraction)
        send({"event": "progress", "fraction": fraction, "message": message_arg("progress", message)})

    def log(level, message):
        """Sends a log line to the caller, now; level is one of toolhost.LOG_LEVELS."""
        if level not in LOG_LEVELS or not isinstance(level, str):
            raise ValueError("toolhost.log: level must be one of %s, not %r" % (", ".join(LOG_LEVELS), level))
        send({"event": "log", "level": level, "message": message_arg("log", message)})

    class Part:
        """One part of a result's content; make it with toolhost.text, image, audio or resource."""

        __slots__ = ("_json",)

        def __init__(self, fields):
            self._json = fields

        def __repr__(self):
            f = self._json
            return "toolhost.Part(%s%s)" % (f["type"], ", " + f["mime_type"] if "mime_type" in f else "")

    def b64(data):
        return binascii.b2a_base64(data, newline=False).decode("ascii")

    def text(s):
        """A text part."""
        return Part({"type": "text", "text": text_arg("text", "s", s)})

    def image(data, mime_type):
        """An image part: its bytes and MIME type ("image/png")."""
        data = bytes_arg("image", "data", data)
        return Part({"type": "image", "data": b64(data), "mime_type": mime_arg("image", mime_type, "image/")})

    def audio(data, mime_type):
        """An audio part: its bytes and MIME type ("audio/wav")."""
        data = bytes_arg("audio", "data", data)
        return Part({"type": "audio", "data": b64(data), "mime_type": mime_arg("audio", mime_type, "audio/")})

    def resource(uri, *, text=None, blob=None, mime_type=None):
        """An embedded resource: its URI and either text or blob (bytes), and its MIME type."""
        f = {"type": "resource", "uri": text_arg("resource", "uri", uri)}
        if not uri:
            raise ValueError("toolhost.resource: uri must not be empty")
        if (text is None) == (blob is None):
            raise TypeError("toolhost.resource: give text or blob (bytes), one of them")
        if text is not None:
            f["text"] = text_arg("resource", "text", text)
        else:
            f["data"] = b64(bytes_arg("resource", "blob", blob))
        if mime_type is not None:
            f["mime_type"] = mime_arg("resource", mime_type, "")
        return Part(f)

    class Content:
        """A run's result with content: return toolhost.content(part, ..., value=v) from run."""

        __slots__ = ("parts", "value")

        def __init__(self, parts, value):
            self.parts, self.value = parts, value

    def content(*parts, value=None):
        """The run's result: these parts, in order, and optionally a JSON value."""
        for i, p in enumerate(parts):
            if type(p) is not Part:
                raise TypeError("toolhost.content: part %d is a %s; make parts with toolhost.text, image, audio or resource"
                                % (i + 1, type(p).__name__))
        return Content(tuple(parts), value)

    for f in (progress, log, text, image, audio, resource, content):
        setattr(mod, f.__name__, f)
    mod.Part, mod.Content, mod.LOG_LEVELS = Part, Content, LOG_LEVELS
    return mod


def content_json(out, toolhost):
    # The answer's result and content for what run returned: its JSON text and the content parts'
    # JSON text ("" for none), or an error's message.
    if type(out) is not toolhost.Content:
        return json_dumps(out, allow_nan=False), ""
    parts = out.parts
    if type(parts) is not tuple or any(type(p) is not toolhost.Part for p in parts):
        raise TypeError("the result's content parts must be made with toolhost.text, image, audio or resource")
    return json_dumps(out.value, allow_nan=False), json_dumps([p._json for p in parts], allow_nan=False)


def warm_up():
    # The child shares the parent's memory copy-on-write; in gVisor every first write to a page
    # is a fault the sentry handles. Taking the paths a run takes once now moves those faults off
    # the request.
    scope = {"__name__": "tool", "__builtins__": __builtins__}
    exec(compile("def run(**a):\n    return [a, 1.5, None, True]\n", "tool.py", "exec", dont_inherit=True), scope)
    json_dumps(scope["run"](**json_loads('{"x": "y", "n": [1, 2.5, null, true]}')), allow_nan=False)


def child(w):
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    warm_up()
    write_all(CONTROL, b"ready\n")
    req = read_request()
    cpu = int(req.get("cpu_seconds") or 0)
    if cpu > 0:
        # RLIMIT_CPU counts the process's whole life; what it used while it waited (next to
        # nothing: it was blocked in read) is added, so the run's CPU seconds count from now.
        ru = resource.getrusage(resource.RUSAGE_SELF)
        used = int(ru.ru_utime + ru.ru_stime)
        soft, hard = cpu + used, cpu + used + 1
        _, cap = resource.getrlimit(resource.RLIMIT_CPU)
        if cap != resource.RLIM_INFINITY:
            soft, hard = min(soft, cap), min(hard, cap)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    seconds = int(req.get("seconds") or 0)
    write_all(w, b"asked %d %d\n" % (cpu, seconds))
    tried_network = [False]

    def audit(event, _args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto", "socket.sendmsg"):
            tried_network[0] = True

    sys.addaudithook(audit)

    def answer(msg, raw_result=None, raw_content=""):
        sys.stdout.flush()
        sys.stderr.flush()
        if raw_result is None:
            data = json_dumps(msg)
        elif raw_content:
            data = '{"ok": true, "result": ' + raw_result + ', "content": ' + raw_content + "}"
        else:
            data = '{"ok": true, "result": ' + raw_result + "}"
        write_all(CONTROL, (data + "\n").encode())
        write_all(w, b"answered\n")

    code = req.get("code", "")
    try:
        if req.get("mode") == "check":
            import ast

            tree = compile(code, "tool.py", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
            compile(tree, "tool.py", "exec", dont_inherit=True)
            if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
                answer({"error": "no_run"})
                return
            answer({"ok": True})
            return
        compiled = compile(code, "tool.py", "exec", dont_inherit=True)
    except SyntaxError as e:
        answer({"error": "compile", "msg": e.msg, "line": e.lineno})
        return
    except ValueError as e:  # e.g. a null byte in the source
        answer({"error": "compile", "msg": str(e), "line": None})
        return

    toolhost = make_toolhost()
    sys.modules["toolhost"] = toolhost
    scope = {"__name__": "tool", "__builtins__": __builtins__}
    try:
        exec(compiled, scope)
        fn = scope.get("run")
        if not callable(fn):
            answer({"error": "no_run"})
            return
        out = fn(**(req.get("args") or {}))
    except BaseException as e:  # noqa: B036 — the code's failure, whatever it is, is the answer
        answer(describe(e, tried_network[0]))
        return
    try:
        text, parts = content_json(out, toolhost)
    except (TypeError, ValueError, RecursionError) as e:
        answer({"error": "bad_result", "msg": str(e) if type(out) is toolhost.Content else ""})
        return
    answer(None, raw_result=text, raw_content=parts)


def describe(e, tried_network):
    import errno
    import traceback

    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "tool.py":
        tb = tb.tb_next
    try:
        traceback.print_exception(type(e), e, tb, file=sys.stderr)
        sys.stderr.flush()
    except Exception:
        pass
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    kind, full = "", ""
    net_types = tuple(
        t for t in (getattr(sys.modules.get("socket"), n, None) for n in ("gaierror", "herror", "timeout")) if t
    )
    net_errnos = {
        errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNREFUSED, errno.ENETDOWN, errno.ECONNRESET,
        errno.ETIMEDOUT, errno.EADDRNOTAVAIL, errno.ECONNABORTED,
    }
    seen, x = set(), e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if isinstance(x, MemoryError):
            kind = "memory"
            break
        if isinstance(x, OSError) and x.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            kind = "disk"
            for path in ("/work", "/tmp"):
                try:
                    st = os.statvfs(path)
                    if st.f_bavail * st.f_frsize < (1 << 20) or st.f_favail == 0:
                        full = path
                        break
                except OSError:
                    pass
            break
        if tried_network and (isinstance(x, ConnectionError) or (net_types and isinstance(x, net_types))
                              or (isinstance(x, OSError) and x.errno in net_errnos)):
            kind = "network"
            break
        reason = getattr(x, "reason", None)  # urllib.error.URLError keeps the socket's error here
        x = reason if isinstance(reason, BaseException) else (x.__cause__ or x.__context__)
    return {"error": "exception", "last": last, "kind": kind, "full": full}


main()
