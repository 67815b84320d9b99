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
#     value when it is an expression whose value isn't None, as a notebook shows it.
#
# stdout and stderr are the kernel's own (the agent forwards them to the cell that runs); stdin
# is /dev/null. SIGINT while a cell runs raises KeyboardInterrupt in it, and is ignored between
# cells. A cell's traceback names it "<cell N>" and shows its lines.
import ast
import importlib
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
                result = run_cell(cell.get("code", ""), "<cell %d>" % n, ns)
            finally:
                running[0] = False
        except KeyboardInterrupt:
            # Raised in the kernel's own lines, as the cell ended.
            result = {"exit": 130, "value": None}
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except BaseException:
                pass
        line = (json.dumps(result) + "\n").encode()
        view = memoryview(line)
        while view:
            try:
                view = view[os.write(done, view):]
            except InterruptedError:
                continue
            except OSError:
                os._exit(0)


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


def run_cell(code, filename, ns):
    # Run code in ns: all but a last expression as statements, then that expression, whose
    # value (not None) is the cell's value.
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
