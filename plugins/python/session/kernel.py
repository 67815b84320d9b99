# The live interpreter of a conversation sandbox: run_python's code runs here, one cell at a
# time, in one namespace (the module __main__) that lasts from run to run, as in a notebook. The
# agent starts it as a run of its own (under a shepherd, in /work, as the code's user) and talks
# to it over two pipes:
#
#   agent -> kernel, fd 0 at start: cells, each a 4-byte big-endian length, then a JSON object
#     {"code": "...", "mark": "NAME=VALUE"}; mark is set in os.environ for the cell, so the
#     processes it starts carry it.
#   kernel -> agent, fd 3 at start: one JSON line for each cell, written once everything the cell
#     printed is written: {"exit": N, "value": "..." or null}. exit is 0, 1 for an exception,
#     130 for KeyboardInterrupt, or SystemExit's code; value is repr() of the last statement's
#     value when it is an expression whose value isn't None, as a notebook shows it. Before it,
#     a line for each image the cell shows, written once what it printed before is written:
#     {"display": {"mime_type": "image/png", "data": BASE64}}.
#
# Images, as a notebook shows them: display(obj) (a builtin here) shows an object with
# _repr_png_ or _repr_jpeg_ (a PIL image, say) or a matplotlib figure, and prints anything else
# as repr(); a last expression whose value is one of those is shown, not printed; matplotlib's
# plt.show() shows the open figures, and so does the end of a cell that left some open (the
# backend "module://toolhost_display" is matplotlib's default here: the interpreter sets it
# once matplotlib is imported, unless the code chose one before).
#
# stdout and stderr are the kernel's own (the agent forwards them to the cell that runs); stdin
# is /dev/null. SIGINT while a cell runs raises KeyboardInterrupt in it, and is ignored between
# cells. A cell's traceback names it "<cell N>" and shows its lines.
import ast
import base64
import builtins
import importlib
import importlib.util
import json
import linecache
import os
import signal
import site
import struct
import sys
import traceback
import types

MAXVALUE = 64 << 10  # the most characters of a value sent back
MAXIMAGE = 4 << 20  # the largest image shown (its bytes)
FIONREAD = 0x541B  # Linux's ioctl: the bytes a pipe holds unread
BACKEND = "toolhost_display"  # matplotlib's backend here: module://toolhost_display
# The backend: figures drawn with Agg, shown as PNG images by plt.show() (see show_figures).
BACKEND_SOURCE = '''
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas

def show(*args, **kwargs):
    import builtins
    builtins.__toolhost_show_figures__()
'''
SHOWN_TYPES = (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"))


class Displays:
    # Sends the images a cell shows to the agent, on the pipe of the cells' ends.

    def __init__(self, fd):
        self.fd = fd

    def send(self, mime_type, data):
        if not isinstance(data, (bytes, bytearray)) or not data:
            return False
        if len(data) > MAXIMAGE:
            print("[an image of %d bytes was not shown: the most is %d MiB]" % (len(data), MAXIMAGE >> 20),
                  file=sys.stderr)
            return True
        # In order with what the cell prints: the agent reads stdout, stderr and this pipe as
        # each has something, so the image goes once what was printed before it was read, and
        # the cell goes on once the image was read.
        flush()
        wait_read((1, 2))
        line = json.dumps({"display": {"mime_type": mime_type, "data": base64.b64encode(bytes(data)).decode()}})
        write_all(self.fd, (line + "\n").encode())
        wait_read((self.fd,))
        return True

    def figure(self, fig):
        # A figure shown is closed, as plt.show() closes them in a notebook: the cell's end
        # doesn't show it again.
        import io
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            try:
                plt.close(fig)
            except Exception:
                pass
        return self.send("image/png", buf.getvalue())

    def show(self, obj):
        # Shows obj as an image if it is one (True), or does nothing (False).
        if is_figure(obj):
            return self.figure(obj)
        for method, mime_type in SHOWN_TYPES:
            f = getattr(type(obj), method, None)
            if f is None:
                continue
            try:
                data = f(obj)
            except Exception:
                continue
            if isinstance(data, tuple):  # IPython's (data, metadata)
                data = data[0]
            if self.send(mime_type, data):
                return True
        return False

    def show_figures(self):
        # Shows every open figure of pyplot and closes it, as a notebook's inline backend does.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            from matplotlib._pylab_helpers import Gcf
            managers = Gcf.get_all_fig_managers()
        except Exception:
            return
        for manager in managers:
            try:
                self.figure(manager.canvas.figure)
            except Exception as e:
                print("[a figure could not be drawn: %s: %s]" % (type(e).__name__, e), file=sys.stderr)
        try:
            plt.close("all")
        except Exception:
            pass


def is_figure(obj):
    mpl_figure = sys.modules.get("matplotlib.figure")
    return mpl_figure is not None and isinstance(obj, mpl_figure.Figure)


class Backend:
    # An import hook: module://toolhost_display is made from BACKEND_SOURCE, and matplotlib, once
    # imported, gets it as its backend unless the code (or MPLBACKEND) chose one before.

    def __init__(self):
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name == BACKEND:
            return importlib.util.spec_from_loader(name, self)
        if name != "matplotlib" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is not None and spec.loader is not None:
            spec.loader = AfterImport(spec.loader, use_backend)
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(BACKEND_SOURCE, module.__dict__)


class AfterImport:
    # A loader that calls after(module) once loader has run the module.

    def __init__(self, loader, after):
        self.loader, self.after = loader, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.after(module)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self.loader, name)


def use_backend(matplotlib):
    # MPLBACKEND is Agg for every process of a session (it can't show a figure); the interpreter
    # shows them. A backend the code set in the environment itself is kept.
    if os.environ.get("MPLBACKEND", "agg").lower() == "agg":
        matplotlib.rcParams["backend"] = "module://" + BACKEND


def wait_read(fds, most=2.0):
    # Waits (at most `most` seconds: an fd the code pointed elsewhere may never empty) until
    # the pipes of fds hold nothing the agent hasn't read.
    import fcntl
    import time

    def unread(fd):
        try:
            return struct.unpack("i", fcntl.ioctl(fd, FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return 0

    end, pause = time.monotonic() + most, 0.0001
    while any(unread(fd) > 0 for fd in fds) and time.monotonic() < end:
        time.sleep(pause)
        pause = min(pause * 2, 0.005)


def flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)


def main():
    cells = os.dup(0)  # not inheritable (PEP 446): the code's processes don't get it
    done = os.dup(3)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.close(3)
    sys.stdin = open(0, "r", closefd=False)

    running = [False]

    def interrupt(signum, frame):
        if running[0]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    # The agent stops a cell's leftover processes before it kills them; those in the
    # interpreter's process group make it an orphaned group with stopped members, which the
    # kernel answers with SIGHUP to the whole group, the interpreter too. A handler (not SIG_IGN,
    # which the code's processes would inherit) lets it pass.
    signal.signal(signal.SIGHUP, lambda signum, frame: None)

    displays = Displays(done)

    def display(*objs):
        """Show each object as a notebook does: an image (a matplotlib figure, or an object with
        _repr_png_ or _repr_jpeg_) as an image output, anything else as its repr() on stdout."""
        for obj in objs:
            if not displays.show(obj):
                print(repr(obj))

    builtins.display = display
    builtins.__toolhost_show_figures__ = displays.show_figures
    sys.meta_path.insert(0, Backend())

    main_module = types.ModuleType("__main__")
    main_module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main_module
    ns = main_module.__dict__
    sys.argv = [""]

    n = 0
    while True:
        cell = read_cell(cells)
        if cell is None:
            os._exit(0)  # the agent is gone
        if cell.get("code"):
            n += 1  # an empty cell (a ready sandbox's start) isn't one of the code's
        add_user_site()
        mark = cell.get("mark", "")
        if "=" in mark:
            name, _, value = mark.partition("=")
            os.environ[name] = value
        result = {"exit": 1, "value": None}
        try:
            running[0] = True
            try:
                result = run_cell(cell.get("code", ""), "<cell %d>" % n, ns, displays)
                displays.show_figures()  # what the cell drew and didn't show
            finally:
                running[0] = False
        except KeyboardInterrupt:
            # Raised in the kernel's own lines, as the cell ended.
            result = {"exit": 130, "value": None}
        except BaseException:
            pass
        flush()
        write_all(done, (json.dumps(result) + "\n").encode())


def add_user_site():
    # What pip installs (PIP_USER: in the user's site below /work) imports in the next cell, as
    # in a new python3, though the folder was made after the interpreter started.
    try:
        d = site.getusersitepackages()
        if site.ENABLE_USER_SITE and d not in sys.path and os.path.isdir(d):
            site.addsitedir(d)
            importlib.invalidate_caches()
    except Exception:
        pass


def read_cell(fd):
    head = read_exactly(fd, 4)
    if head is None:
        return None
    body = read_exactly(fd, struct.unpack(">I", head)[0])
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return {"code": "raise SystemError('the cell could not be read')"}


def read_exactly(fd, size):
    out = b""
    while len(out) < size:
        try:
            chunk = os.read(fd, size - len(out))
        except InterruptedError:
            continue
        except KeyboardInterrupt:
            continue  # a late interrupt, between cells
        if not chunk:
            return None
        out += chunk
    return out


def run_cell(code, filename, ns, displays):
    # Run code in ns: all but a last expression as statements, then that expression, whose
    # value (not None) is the cell's value, or is shown when it is an image.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename, "exec")
    except (SyntaxError, ValueError) as e:
        traceback.print_exception(type(e), e, None)
        return {"exit": 1, "value": None}
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    try:
        exec(compile(tree, filename, "exec"), ns)
        value = None
        if last is not None:
            value = eval(compile(last, filename, "eval"), ns)
        if value is None:
            return {"exit": 0, "value": None}
        ns["_"] = value
        if displays.show(value):
            return {"exit": 0, "value": None}
        shown = repr(value)
        if len(shown) > MAXVALUE:
            shown = shown[:MAXVALUE] + "…"
        return {"exit": 0, "value": shown}
    except SystemExit as e:
        code = e.code
        if code is None:
            return {"exit": 0, "value": None}
        if isinstance(code, int):
            return {"exit": code & 0xFF, "value": None}
        print(code, file=sys.stderr)
        return {"exit": 1, "value": None}
    except KeyboardInterrupt as e:
        print_error(e)
        return {"exit": 130, "value": None}
    except BaseException as e:
        print_error(e)
        return {"exit": 1, "value": None}


def print_error(e):
    # The traceback from the cell's frames on: the kernel's own frame is left out.
    tb = e.__traceback__
    if tb is not None:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)


main()
