// toolhost web UI: talks to the host over the websocket protocol only
// (docs/protocol.md). No build step, no dependencies.
"use strict";

(() => {
  const PROTOCOL = 1;
  // The built-in tools that run in a conversation's sandbox.
  const SESSION_TOOLS = new Set(["run_python", "run_bash", "sandbox_files", "sandbox_file"]);
  const TOKEN_KEY = "toolhost.token";
  const RECENT_KEY = "toolhost.recent";
  const MAX_RECENT = 30;
  const MAX_SHOWN = 5000; // output chunks kept on the page

  const $ = (id) => document.getElementById(id);
  const el = (tag, props, ...kids) => {
    const n = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === "class") n.className = v;
        else if (k === "text") n.textContent = v;
        else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
        else if (v === true) n.setAttribute(k, "");
        else if (v !== false && v != null) n.setAttribute(k, v);
      }
    }
    for (const kid of kids) if (kid != null) n.append(kid);
    return n;
  };

  const state = {
    ws: null,
    open: false,
    signedIn: false,
    authRequired: false,
    tools: [],
    tool: null, // the selected tool's spec
    run: null, // {id, run, tool, lastSeq, state, started, ended}
    nextId: 1,
    retry: 0,
    pending: [], // frames to send once signed in
    selectAfterTools: "", // a tool to open once the list has it (just saved)
    defTicket: 0, // the newest definition asked for
    view: "tools", // "tools" or "conversations"
  };

  // ---- storage ----
  const store = {
    token: () => sessionStorage.getItem(TOKEN_KEY) || "",
    setToken: (t) => (t ? sessionStorage.setItem(TOKEN_KEY, t) : sessionStorage.removeItem(TOKEN_KEY)),
    recent: () => {
      try { return JSON.parse(sessionStorage.getItem(RECENT_KEY) || "[]"); } catch { return []; }
    },
    setRecent: (list) => sessionStorage.setItem(RECENT_KEY, JSON.stringify(list.slice(0, MAX_RECENT))),
  };

  // ---- connection ----
  function connect() {
    setConn("connecting", "connecting…");
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/api/v1/ws`);
    state.ws = ws;
    ws.onopen = () => {
      state.open = true;
      state.retry = 0;
      setConn("open", "connected");
      const hello = { type: "hello", id: "hello", client: "toolhost-web", protocol: PROTOCOL };
      const tok = store.token();
      if (tok) hello.token = tok;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (e) => {
      let f;
      try { f = JSON.parse(e.data); } catch { return; }
      onFrame(f);
    };
    ws.onclose = () => {
      const wasSignedIn = state.signedIn;
      state.open = false;
      state.signedIn = false;
      if (state.ws !== ws) return;
      if (state.expectClose) {
        // The host closes the connection after a refused token: open a
        // fresh one for the next try, without fuss.
        state.expectClose = false;
        connect();
        return;
      }
      setConn("closed", "disconnected, retrying…");
      const delay = Math.min(10000, 500 * 2 ** state.retry++);
      setTimeout(connect, wasSignedIn || state.retry < 2 ? delay : Math.max(delay, 2000));
    };
  }

  function send(frame) {
    if (state.ws && state.open && state.signedIn) state.ws.send(JSON.stringify(frame));
    else state.pending.push(frame);
  }

  function setConn(s, text) {
    $("conn").dataset.state = s;
    $("conn-text").textContent = text;
  }

  // ---- frames ----
  function onFrame(f) {
    switch (f.type) {
      case "hello": return onHello(f);
      case "tools": return onTools(f.tools || []);
      case "pong": return;
    }
    if (f.type === "error" && f.error && f.error.code === "unauthorized") return onUnauthorized(f.error.message);
    if (f.type === "approval_required") approvals.refresh(); // approvals.js shows it
    // The frames of a run started in Conversations are its.
    if (conv.owns(f.id)) return conv.onFrame(f);
    switch (f.type) {
      case "behind": return onBehind(f);
      case "error":
        if (f.run && f.seq !== undefined) return onEvent(f);
        return onRefused(f);
      default:
        if (f.run && f.seq !== undefined) onEvent(f);
    }
  }

  function onHello(f) {
    if (f.protocol !== PROTOCOL) {
      toast(`This host speaks protocol ${f.protocol}; this page speaks ${PROTOCOL}. Reload the page.`);
      return;
    }
    state.authRequired = !!f.auth_required;
    if (!f.principal) {
      showSignIn();
      return;
    }
    state.signedIn = true;
    state.role = f.role;
    $("who").hidden = !f.auth_required;
    $("who").textContent = `${f.principal} · ${f.role}`;
    $("signout").hidden = !f.auth_required;
    $("admin-actions").hidden = f.role !== "admin";
    showApp();
    conversationsFor(f.principal, f.role);
    approvals.signedIn(f.principal);
    // Signed in again, maybe in another role: what may be edited changes.
    if (state.tool && (state.tool.kind === "graph" || state.tool.kind === "prompt")) loadDefinition(state.tool.function.name);
    else if (editor.ed && f.role !== "admin") editor.hide();
    state.ws.send(JSON.stringify({ type: "list_tools", id: "tools" }));
    // Pick the current run up where it was.
    const r = state.run;
    if (r && r.state === "running" && r.run) {
      state.ws.send(JSON.stringify({ type: "attach", id: r.id, run: r.run, after_seq: r.lastSeq }));
    } else if (r && r.state === "running" && !state.pending.some((p) => p.id === r.id)) {
      r.ended = Date.now();
      showError({ message: "the connection dropped before the host said the run had started; it may have run anyway" }, "Connection lost");
      setRunState("failed");
    }
    const pending = state.pending;
    state.pending = [];
    for (const p of pending) state.ws.send(JSON.stringify(p));
    conv.resume();
  }

  function onUnauthorized(message) {
    state.expectClose = true;
    const had = store.token();
    store.setToken("");
    showSignIn(had ? "That token is not one this host knows." : message);
  }

  // ---- views ----
  function showSignIn(error) {
    $("app-view").hidden = true;
    $("signin-view").hidden = false;
    $("signout").hidden = true;
    $("who").hidden = true;
    const e = $("signin-error");
    if (error !== undefined) {
      e.hidden = !error;
      e.textContent = error || "";
    }
    $("token").focus();
  }

  function showApp() {
    $("signin-view").hidden = true;
    $("app-view").hidden = false;
    renderRecent();
  }

  $("signin").addEventListener("submit", (e) => {
    e.preventDefault();
    const tok = $("token").value.trim();
    if (!tok) return;
    store.setToken(tok);
    $("token").value = "";
    $("signin-error").hidden = true;
    if (state.ws && state.open) {
      state.ws.send(JSON.stringify({ type: "hello", id: "hello", client: "toolhost-web", protocol: PROTOCOL, token: tok }));
    } else {
      connect();
    }
  });

  $("signout").addEventListener("click", () => {
    store.setToken("");
    $("toast").hidden = true;
    conv.reset();
    $("views").hidden = true;
    setView("tools");
    // The next to sign in gets the list anew.
    state.tools = [];
    renderTools();
    const ws = state.ws;
    state.ws = null;
    if (ws) ws.close();
    state.signedIn = false;
    showSignIn("");
    connect();
  });

  // ---- tools ----
  function onTools(tools) {
    state.tools = tools.slice().sort((a, b) => a.function.name.localeCompare(b.function.name));
    $("tool-count").textContent = `${state.tools.length}`;
    renderTools();
    if (state.selectAfterTools) {
      const t = state.tools.find((x) => x.function.name === state.selectAfterTools);
      state.selectAfterTools = "";
      if (t) return selectTool(t);
    }
    if (state.tool) {
      // The list may have changed (a tool saved): keep the spec current.
      const t = state.tools.find((x) => x.function.name === state.tool.function.name);
      if (t) state.tool = t;
    }
    const fresh = /^#new=(graph|prompt)$/.exec(location.hash);
    if (fresh && !state.tool && !editor.ed && state.role === "admin") return openNew(fresh[1]);
    const want = decodeURIComponent(location.hash.replace(/^#tool=/, ""));
    if (!state.tool && want && !editor.ed) {
      const t = state.tools.find((x) => x.function.name === want);
      if (t) selectTool(t);
    }
  }

  function renderTools() {
    const q = $("filter").value.trim().toLowerCase();
    const list = $("tools");
    list.replaceChildren();
    for (const t of state.tools) {
      const fn = t.function;
      if (q && !fn.name.toLowerCase().includes(q) && !(fn.description || "").toLowerCase().includes(q)) continue;
      const b = el("button", { type: "button", "data-tool": fn.name, "aria-current": state.tool && state.tool.function.name === fn.name ? "true" : "false", title: fn.description || "" },
        el("span", { class: "t-name", text: fn.name }),
        el("span", { class: "t-desc", text: fn.description || "" }));
      b.addEventListener("click", () => selectTool(t));
      list.append(el("li", null, b));
    }
    if (!list.children.length) list.append(el("li", { class: "muted small-text", text: state.tools.length ? "No tool matches." : "This host serves no tools yet." }));
  }
  $("filter").addEventListener("input", renderTools);

  // typeOf is a param's JSON Schema type leaving out "null", which an
  // optional param also takes (it means "not given").
  function typeOf(schema) {
    const t = schema.type;
    if (!Array.isArray(t)) return t;
    const rest = t.filter((x) => x !== "null");
    return rest.length === 1 ? rest[0] : undefined;
  }

  function kindOf(schema) {
    if (schema.enum) return "options";
    switch (typeOf(schema)) {
      case "string": return "text";
      case "number": return "number";
      case "integer": return "integer";
      case "boolean": return "bool";
      case "array": return "list";
      default: return "json";
    }
  }

  function selectTool(t) {
    if (state.view !== "tools") setView("tools");
    state.tool = t;
    const fn = t.function;
    history.replaceState(null, "", `#tool=${encodeURIComponent(fn.name)}`);
    $("empty").hidden = true;
    $("tool-view").hidden = false;
    if (state.run && state.run.tool !== fn.name && state.run.state !== "running") $("run-view").hidden = true;
    if (t.kind === "graph" || t.kind === "prompt") loadDefinition(fn.name);
    else {
      state.defTicket++;
      editor.hide();
    }
    $("tool-name").textContent = fn.name;
    $("tool-desc").textContent = fn.description || "";
    $("tool-kind").textContent = t.kind || "";
    const eff = $("tool-effect");
    eff.textContent = t.effect === "change" ? "changes things" : "read only";
    eff.className = "badge" + (t.effect === "change" ? " change" : "");
    renderTools();

    const params = (fn.parameters && fn.parameters.properties) || {};
    const required = new Set((fn.parameters && fn.parameters.required) || []);
    const names = Object.keys(params).sort((a, b) => (required.has(b) - required.has(a)) || a.localeCompare(b));
    const fields = $("fields");
    fields.replaceChildren();
    if (!names.length) fields.append(el("p", { class: "no-params", text: "This tool takes no parameters." }));
    for (const name of names) fields.append(field(name, params[name], required.has(name)));
    const viewer = state.role === "viewer";
    $("run-button").disabled = viewer;
    $("run-hint").textContent = viewer ? "You are signed in as a viewer: you can look at tools, not run them."
      : SESSION_TOOLS.has(fn.name) && conv.ok ? "This tool runs in a conversation's sandbox: try it in Conversations."
        : "Ctrl+Enter runs";
    const first = fields.querySelector("input, textarea, select");
    if (first) first.focus();
  }

  // ---- tool definitions: the graph canvas and the prompt form ----
  // api makes an HTTP request to the host with this tab's token.
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const tok = store.token();
    if (tok) headers.Authorization = `Bearer ${tok}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(path, {
      method, headers, cache: "no-store", credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await resp.json(); } catch { data = null; }
    return { status: resp.status, body: data };
  }

  const editor = new window.ToolhostEditor({
    root: $("def-view"),
    request: api,
    tools: () => state.tools,
    toast,
    saved: (name) => {
      // The host serves it at once: ask for the list again and open it.
      state.selectAfterTools = name;
      send({ type: "list_tools", id: "tools" });
    },
  });

  // ---- approvals of change calls (approvals.js) ----
  const approvals = new window.ToolhostApprovals({ root: $("approvals"), request: api, toast });

  // ---- conversations: their sandboxes, files and runs ----
  const conv = new window.ToolhostConversations({
    side: $("conv-side"),
    main: $("conv-main"),
    token: store.token,
    send,
    toast,
    navigate: (hash) => { if (state.view === "conversations") history.replaceState(null, "", hash); },
  });

  // conversationsFor shows the Conversations view to a caller who may use
  // sessions (never a viewer), once the host says so.
  async function conversationsFor(principal, role) {
    const ok = await conv.signedIn(principal, role);
    if (!state.signedIn || state.role !== role) return;
    $("views").hidden = !ok;
    if (!ok) {
      if (state.view === "conversations") setView("tools");
      return;
    }
    const m = /^#conv(?:=([^&]*)(?:&principal=(.*))?|ersations)$/.exec(location.hash);
    if (m && state.view !== "conversations") {
      setView("conversations");
      conv.show(m[1] ? decodeURIComponent(m[1]) : "", m[2] ? decodeURIComponent(m[2]) : "");
    } else if (state.view === "conversations") {
      conv.show("");
    }
  }

  function setView(v) {
    state.view = v;
    const convs = v === "conversations";
    $("tools-side").hidden = convs;
    $("tools-main").hidden = convs;
    $("conv-side").hidden = !convs;
    $("conv-main").hidden = !convs;
    for (const b of document.querySelectorAll("#views button")) b.setAttribute("aria-current", b.dataset.view === v ? "page" : "false");
    if (!convs) history.replaceState(null, "", state.tool ? `#tool=${encodeURIComponent(state.tool.function.name)}` : location.pathname);
  }

  for (const b of document.querySelectorAll("#views button")) {
    b.addEventListener("click", () => {
      if (b.dataset.view === state.view) return;
      setView(b.dataset.view);
      if (b.dataset.view === "conversations") {
        conv.show("");
        conv.refreshList();
      }
    });
  }

  async function loadDefinition(name) {
    const ticket = ++state.defTicket;
    editor.message("Loading the tool's definition…");
    let resp;
    try {
      resp = await api("GET", `/api/v1/tools/${encodeURIComponent(name)}`);
    } catch (e) {
      if (ticket === state.defTicket) editor.message(`The host could not be reached for this tool's definition: ${e.message}.`);
      return;
    }
    if (ticket !== state.defTicket) return;
    const b = resp.body || {};
    if (resp.status !== 200 || !b.tool || !b.tool.run) {
      editor.message(`The host did not give this tool's definition: ${sentence((b.error && b.error.message) || `it answered ${resp.status}`)}`);
      return;
    }
    editor.open(Object.assign({}, b.tool, { source: b.source }), {
      editable: state.role === "admin" && b.editable === true,
      why: state.role !== "admin" ? "Only admins change tools." : (b.not_editable || ""),
    });
  }

  function openNew(kind) {
    if (state.role !== "admin") return;
    state.tool = null;
    state.defTicket++;
    history.replaceState(null, "", `#new=${kind}`);
    $("empty").hidden = true;
    $("tool-view").hidden = true;
    if (!state.run || state.run.state !== "running") $("run-view").hidden = true;
    renderTools();
    if (kind === "prompt") editor.newPrompt();
    else editor.newGraph();
    const name = $("def-name");
    if (name) name.focus();
  }
  $("new-graph").addEventListener("click", () => openNew("graph"));
  $("new-prompt").addEventListener("click", () => openNew("prompt"));

  function field(name, schema, required) {
    const kind = kindOf(schema);
    const id = `p-${name}`;
    let input;
    switch (kind) {
      case "options": {
        input = el("select", { id, name });
        if (!required) input.append(el("option", { value: "", text: "— none —" }));
        for (const v of schema.enum) if (v !== null) input.append(el("option", { value: JSON.stringify(v), text: String(v) }));
        break;
      }
      case "number":
      case "integer":
        input = el("input", { id, name, type: "number", step: kind === "integer" ? "1" : "any", inputmode: kind === "integer" ? "numeric" : "decimal" });
        break;
      case "bool":
        input = el("input", { id, name, type: "checkbox" });
        break;
      case "list":
      case "json":
        input = el("textarea", { id, name, rows: "3", spellcheck: "false", placeholder: kind === "list" ? listPlaceholder(schema.items) : '{"key": "value"}' });
        break;
      default:
        input = el("textarea", { id, name, rows: "1", class: "text" });
        input.addEventListener("input", () => autoGrow(input));
    }
    input.dataset.kind = kind;
    input.dataset.param = name;
    if (required) input.required = true;
    const label = el("div", { class: "label-row" },
      el("label", { for: id, text: name }),
      el("span", { class: "kind", text: kind === "options" ? "one of" : kind }),
      required ? el("span", { class: "req", text: "required" }) : null);
    const help = schema.description ? el("p", { class: "help", text: schema.description }) : null;
    const err = el("p", { class: "field-error", hidden: true });
    const wrap = el("div", { class: "field", "data-field": name });
    const parts = kind === "bool" ? [el("div", { class: "check-row" }, input, label), help, err] : [label, input, help, err];
    wrap.append(...parts.filter((x) => x));
    return wrap;
  }

  // listPlaceholder shows what a list param holds (its items' schema).
  function listPlaceholder(items) {
    switch (items && typeOf(items)) {
      case "number": return "[1.5, 2]";
      case "integer": return "[1, 2]";
      case "boolean": return "[true, false]";
      case "string": return '["a", "b"]';
      default: return '["a", 2, {"key": "value"}]';
    }
  }

  function autoGrow(t) {
    t.style.height = "auto";
    t.style.height = `${Math.min(t.scrollHeight + 2, 320)}px`;
  }

  // collectArgs reads the form; it marks bad fields and returns null when
  // any is wrong.
  function collectArgs() {
    const args = {};
    let ok = true;
    for (const wrap of $("fields").querySelectorAll(".field")) {
      const input = wrap.querySelector("[data-param]");
      const err = wrap.querySelector(".field-error");
      const name = input.dataset.param;
      const kind = input.dataset.kind;
      let problem = "";
      let value;
      let present = true;
      switch (kind) {
        case "bool":
          value = input.checked;
          break;
        case "options":
          present = input.value !== "";
          if (present) value = JSON.parse(input.value);
          break;
        case "number":
        case "integer": {
          const s = input.value.trim();
          present = s !== "";
          if (present) {
            value = Number(s);
            if (!Number.isFinite(value)) problem = "Enter a number.";
            else if (kind === "integer" && !Number.isInteger(value)) problem = "Enter a whole number.";
          } else if (input.validity && input.validity.badInput) {
            present = true;
            problem = "Enter a number.";
          }
          break;
        }
        case "list":
        case "json": {
          const s = input.value.trim();
          present = s !== "";
          if (present) {
            try {
              value = JSON.parse(s);
              if (kind === "list" && !Array.isArray(value)) problem = 'Enter a JSON list, like ["a", "b"].';
            } catch (e) {
              problem = `This is not valid JSON: ${e.message}`;
            }
          }
          break;
        }
        default:
          value = input.value;
          present = value !== "";
      }
      if (!present && input.required) problem = "This is required.";
      wrap.classList.toggle("invalid", !!problem);
      err.hidden = !problem;
      err.textContent = problem;
      if (problem) {
        if (ok) input.focus();
        ok = false;
      } else if (present) {
        args[name] = value;
      }
    }
    return ok ? args : null;
  }

  $("run-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (!state.tool || state.role === "viewer") return;
    const args = collectArgs();
    if (!args) return;
    startRun(state.tool.function.name, args);
  });
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && state.view === "tools" && !$("tool-view").hidden) {
      e.preventDefault();
      $("run-form").requestSubmit();
    }
  });

  // ---- runs ----
  function startRun(tool, args) {
    const id = `ui-${Date.now().toString(36)}-${state.nextId++}`;
    state.run = { id, run: "", tool, args, lastSeq: -1, state: "running", started: Date.now(), ended: 0 };
    showRun();
    send({ type: "call", id, tool, args });
  }

  function openRun(entry) {
    state.run = { id: `ui-attach-${state.nextId++}`, run: entry.run, tool: entry.tool, args: entry.args, lastSeq: -1, state: "running", started: entry.started, ended: 0 };
    showRun();
    send({ type: "attach", id: state.run.id, run: entry.run, after_seq: -1 });
  }

  function showRun() {
    const r = state.run;
    $("run-view").hidden = false;
    $("output").replaceChildren();
    $("output-count").textContent = "";
    $("result-wrap").hidden = true;
    $("run-error").hidden = true;
    $("run-tool").textContent = r.tool;
    const dl = $("run-args");
    dl.replaceChildren();
    for (const [k, v] of Object.entries(r.args || {})) {
      const shown = typeof v === "string" ? v : JSON.stringify(v);
      dl.append(el("div", { class: "arg" }, el("dt", { text: k }), el("dd", { text: shown.length > 120 ? shown.slice(0, 119) + "…" : shown, title: shown })));
    }
    dl.hidden = !dl.children.length;
    $("run-id").textContent = r.run;
    setRunState("running");
    tick();
    renderRecent();
    $("run-view").scrollIntoView({ behavior: "smooth", block: "nearest" });
  }

  function setRunState(s) {
    const r = state.run;
    r.state = s;
    const st = $("run-status");
    st.dataset.state = s;
    st.textContent = { running: "running", done: "done", failed: "failed", cancelled: "cancelled" }[s];
    $("cancel-button").hidden = s !== "running";
    $("cancel-button").disabled = false;
  }

  function tick() {
    const r = state.run;
    if (!r) return;
    const end = r.ended || Date.now();
    const secs = Math.max(0, (end - r.started) / 1000);
    $("run-time").textContent = secs < 60 ? `${secs.toFixed(1)} s` : `${Math.floor(secs / 60)} min ${Math.round(secs % 60)} s`;
    if (r.state === "running") setTimeout(tick, 100);
  }

  function onEvent(f) {
    const r = state.run;
    if (!r || f.id !== r.id) {
      if (f.type === "result" || f.type === "error") updateRecent(f.run, { state: f.type === "result" ? "done" : stateOfError(f.error) });
      return;
    }
    if (f.seq <= r.lastSeq) return; // already shown (a replay overlapping what we had)
    r.lastSeq = f.seq;
    const out = $("output");
    const nearBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 40;
    switch (f.type) {
      case "started":
        r.run = f.run;
        $("run-id").textContent = f.run;
        addRecent({ run: f.run, tool: r.tool, args: r.args, started: r.started, state: "running" });
        break;
      case "stdout":
      case "stderr":
        // Output of a graph's node (its nested call or model answer) is
        // marked with the node.
        out.append(f.node
          ? el("span", { class: `line ${f.type} nested`, "data-node": f.node }, el("span", { class: "node-tag", text: f.node }), f.data)
          : el("span", { class: `line ${f.type}`, text: f.data }));
        r.chunks = (r.chunks || 0) + 1;
        if (out.children.length > MAX_SHOWN) {
          // Keep the page quick: show the newest output only.
          let note = out.querySelector(".trimmed");
          if (!note) {
            note = el("span", { class: "line note trimmed", text: "Earlier output is not shown here; the run's record keeps all of it.\n" });
            out.prepend(note);
          }
          while (out.children.length > MAX_SHOWN + 1) note.nextSibling.remove();
        }
        $("output-count").textContent = `${r.chunks} chunk${r.chunks === 1 ? "" : "s"}`;
        break;
      case "display":
        // Drawn as a conversation's view draws them (sessions.js).
        for (const part of f.content || []) out.append(window.ToolhostConversations.shownPart(part));
        break;
      case "progress": {
        // A fraction outside 0..1 (a graph's "node done" sends -1) says
        // only the message.
        const known = typeof f.fraction === "number" && f.fraction >= 0 && f.fraction <= 1;
        const pct = known ? `${Math.round(f.fraction * 100)}%` : "";
        const text = pct && f.message ? `${pct} — ${f.message}` : pct || f.message || "";
        if (text) out.append(el("span", { class: "line note", "data-node": f.node || null, text: `${text}\n` }));
        break;
      }
      case "result": {
        r.ended = Date.now();
        $("result").textContent = pretty(f.result);
        $("result-wrap").hidden = false;
        setRunState("done");
        updateRecent(f.run, { state: "done" });
        break;
      }
      case "error": {
        r.ended = Date.now();
        const s = stateOfError(f.error);
        showError(f.error, s === "cancelled" ? "Cancelled" : "The run failed");
        setRunState(s);
        updateRecent(f.run, { state: s });
        break;
      }
    }
    if (nearBottom) out.scrollTop = out.scrollHeight;
  }

  function stateOfError(e) {
    return e && e.code === "cancelled" ? "cancelled" : "failed";
  }

  function showError(e, title) {
    $("run-error-title").textContent = title;
    $("run-error-message").textContent = sentence((e && e.message) || "The run ended with an error.");
    $("run-error-code").textContent = e && e.code ? `code: ${e.code}` : "";
    $("run-error").hidden = false;
  }

  function sentence(s) {
    s = s.trim();
    if (!s) return s;
    s = s[0].toUpperCase() + s.slice(1);
    return /[.!?]$/.test(s) ? s : s + ".";
  }

  // onRefused: an error that is not a run's end (a call refused before
  // it ran, a run that is gone, …).
  function onRefused(f) {
    const r = state.run;
    const msg = (f.error && f.error.message) || "The host refused the request.";
    if (r && f.id === r.id && r.state === "running") {
      r.ended = Date.now();
      const title = { unknown_run: "This run is no longer kept", forbidden: "Not allowed", bad_args: "The arguments were refused" }[f.error && f.error.code] || "The call was refused";
      showError(f.error, title);
      setRunState("failed");
      if (f.error && f.error.code === "unknown_run") updateRecent(r.run, { state: "gone" });
      return;
    }
    toast(sentence(msg));
  }

  // onBehind: we read too slowly and the host stopped sending; pick up
  // from the last event we have.
  function onBehind(f) {
    const r = state.run;
    if (r && f.id === r.id) send({ type: "attach", id: r.id, run: r.run, after_seq: r.lastSeq });
  }

  $("cancel-button").addEventListener("click", () => {
    const r = state.run;
    if (!r || r.state !== "running") return;
    $("cancel-button").disabled = true;
    if (r.run) send({ type: "cancel", id: r.id, run: r.run });
    else send({ type: "cancel", id: r.id });
  });

  $("copy-result").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText($("result").textContent);
      toast("Result copied.");
    } catch {
      toast("The browser did not allow copying.");
    }
  });

  function pretty(v) {
    if (v === undefined) return "null";
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }

  // ---- recent runs ----
  function addRecent(entry) {
    const list = store.recent().filter((x) => x.run !== entry.run);
    list.unshift(entry);
    store.setRecent(list);
    renderRecent();
  }

  function updateRecent(run, patch) {
    const list = store.recent();
    const e = list.find((x) => x.run === run);
    if (!e) return;
    Object.assign(e, patch);
    store.setRecent(list);
    renderRecent();
  }

  function renderRecent() {
    const list = store.recent();
    const ul = $("recent");
    ul.replaceChildren();
    $("recent-empty").hidden = list.length > 0;
    for (const e of list) {
      const current = state.run && state.run.run === e.run;
      const b = el("button", { type: "button", "data-run": e.run, "aria-current": current ? "true" : "false", title: `run ${e.run}` },
        el("span", { class: "r-top" },
          el("span", { class: "r-tool", text: e.tool }),
          el("span", { class: "status", "data-state": e.state === "gone" ? "cancelled" : e.state, text: e.state })),
        el("span", { class: "r-when", text: ago(e.started) }));
      b.addEventListener("click", () => openRun(e));
      ul.append(el("li", null, b));
    }
  }

  $("clear-recent").addEventListener("click", () => {
    store.setRecent([]);
    renderRecent();
  });

  function ago(t) {
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 60) return "just now";
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return new Date(t).toLocaleString();
  }

  let toastTimer = 0;
  function toast(text) {
    const t = $("toast");
    t.textContent = text;
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => (t.hidden = true), 4000);
  }

  setInterval(() => { if (!$("app-view").hidden) renderRecent(); }, 30000);
  connect();
})();
