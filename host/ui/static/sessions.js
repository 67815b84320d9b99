// toolhost web UI: Conversations, the caller's conversation sandboxes
// (docs/protocol.md, "Sessions"): a conversation's files (upload, download,
// delete), its network, its run history, and a box to run Python or bash in
// it over the websocket. Every name the host gives back (ids, paths, output)
// is put on the page as text, never as markup. No build step.
"use strict";

(() => {
  const ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
  const NETWORKS = [
    ["off", "Off: no network"],
    ["web", "Web: public addresses, ports 80 and 443"],
    ["packages", "Packages: the package indexes the admin lists"],
  ];
  const MAX_SHOWN = 3000; // output chunks kept on the page

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
    for (const kid of kids) if (kid != null && kid !== false) n.append(kid);
    return n;
  };

  // shownPart is a part a run shows (display events; an image, most often): drawn when it is an
  // image of a raster type, from its bytes in a data: URL (the page's CSP allows data: images
  // only), said in a line otherwise.
  const DRAWN_TYPES = /^image\/(png|jpeg|gif|webp)$/;
  const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
  function shownPart(part) {
    const p = part || {};
    if (p.type === "image" && DRAWN_TYPES.test(p.mime_type || "") && typeof p.data === "string" && BASE64.test(p.data))
      return el("img", { class: "line shown", src: `data:${p.mime_type};base64,${p.data}`, alt: "An image the run showed" });
    return el("span", { class: "line note", text: `[the run showed ${p.type || "a part"}${p.mime_type ? ` (${p.mime_type})` : ""}: not drawn here]\n` });
  }

  function sentence(s) {
    s = String(s || "").trim();
    if (!s) return s;
    s = s[0].toUpperCase() + s.slice(1);
    return /[.!?]$/.test(s) ? s : s + ".";
  }

  function size(n) {
    if (typeof n !== "number") return "";
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KiB`;
    if (n < 1024 * 1024 * 1024) return `${(n / 1048576).toFixed(n < 10485760 ? 1 : 0)} MiB`;
    return `${(n / 1073741824).toFixed(1)} GiB`;
  }

  function ago(t) {
    const ms = typeof t === "number" ? t : Date.parse(t);
    if (!Number.isFinite(ms)) return "";
    const s = Math.round((Date.now() - ms) / 1000);
    if (s < -60) return `in ${until(ms)}`;
    if (s < 60) return "just now";
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return new Date(ms).toLocaleString();
  }

  function until(ms) {
    const s = Math.round((ms - Date.now()) / 1000);
    if (s < 3600) return `${Math.max(1, Math.round(s / 60))} min`;
    if (s < 172800) return `${Math.round(s / 3600)} h`;
    return `${Math.round(s / 86400)} days`;
  }

  function exact(t) {
    const ms = Date.parse(t);
    return Number.isFinite(ms) ? new Date(ms).toLocaleString() : "";
  }

  function took(ms) {
    if (typeof ms !== "number") return "";
    if (ms < 1000) return `${ms} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }

  // A file's path as URL path parts: each part escaped, the slashes kept.
  const encPath = (p) => p.split("/").map(encodeURIComponent).join("/");
  const baseName = (p) => p.slice(p.lastIndexOf("/") + 1);

  function newID() {
    const d = new Date();
    const pad = (n) => String(n).padStart(2, "0");
    const rnd = Array.from(crypto.getRandomValues(new Uint8Array(3)), (b) => b.toString(16).padStart(2, "0")).join("");
    return `web-${d.getFullYear()}${pad(d.getMonth() + 1)}${pad(d.getDate())}-${rnd}`;
  }

  class ToolhostConversations {
    // o: side and main (the elements to fill), token() (this tab's token),
    // send(frame) (a websocket frame, queued while signed out), toast(text),
    // navigate(hash) (the page's address without a reload).
    constructor(o) {
      this.o = o;
      this.side = o.side;
      this.main = o.main;
      this.principal = "";
      this.role = "";
      this.ok = false; // sessions are served to this caller
      this.list = [];
      this.cur = null; // {id, principal, session (the host's record or null), files, runs}
      this.run = null; // {id, run, lastSeq, state, chunks, streamed}
      this.next = 1;
      this.ticket = 0; // the newest view asked for
      this.dialog = null;
      setInterval(() => { if (!this.main.hidden) this.renderTimes(); }, 30000);
    }

    // ---- HTTP ----
    headers(extra) {
      const h = Object.assign({ Accept: "application/json" }, extra || {});
      const tok = this.o.token();
      if (tok) h.Authorization = `Bearer ${tok}`;
      return h;
    }

    // path of the open conversation (rest after its id), with ?principal=
    // for an admin looking at someone else's.
    url(rest, query) {
      const c = this.cur;
      const q = new URLSearchParams(query || {});
      if (c.principal && c.principal !== this.principal) q.set("principal", c.principal);
      const qs = q.toString();
      return `/api/v1/sessions/${encodeURIComponent(c.id)}${rest || ""}${qs ? "?" + qs : ""}`;
    }

    async request(method, path, body, headers) {
      const init = { method, headers: this.headers(headers), cache: "no-store", credentials: "omit" };
      if (body !== undefined) init.body = body;
      let resp;
      try {
        resp = await fetch(path, init);
      } catch (e) {
        return { status: 0, body: null, message: `The host could not be reached: ${e.message}.` };
      }
      let data = null;
      if (resp.status !== 204) {
        try { data = await resp.json(); } catch { data = null; }
      }
      const message = data && data.error ? sentence(data.error.message) : (resp.ok ? "" : `The host answered ${resp.status}.`);
      return { status: resp.status, body: data, message, code: data && data.error ? data.error.code : "" };
    }

    // ---- signing in and out ----
    // signedIn says who the page is signed in as; it asks the host whether
    // this caller may use sessions, and answers so.
    async signedIn(principal, role) {
      const changed = principal !== this.principal || role !== this.role;
      this.principal = principal;
      this.role = role;
      if (changed) this.reset();
      if (role === "viewer") {
        this.ok = false;
        return false;
      }
      const r = await this.request("GET", "/api/v1/sessions");
      if (this.principal !== principal || this.role !== role) return this.ok; // signed in again meanwhile
      this.ok = r.status === 200;
      if (this.ok) this.takeList(r.body.sessions || []);
      return this.ok;
    }

    reset() {
      this.ok = false;
      this.list = [];
      this.cur = null;
      this.run = null;
      this.ticket++;
      this.side.replaceChildren();
      this.main.replaceChildren();
      if (this.dialog && this.dialog.open) this.dialog.close();
    }

    // ---- the list ----
    async refreshList() {
      if (!this.ok) return;
      const r = await this.request("GET", "/api/v1/sessions");
      if (r.status === 200) this.takeList(r.body.sessions || []);
    }

    takeList(list) {
      this.list = list;
      if (this.cur) {
        const s = list.find((x) => x.session === this.cur.id && x.principal === this.cur.principal);
        if (s) this.cur.session = s;
      }
      this.renderSide();
    }

    // renderSide draws the list; the form above it is made once, so what
    // is typed in it stays while the list is drawn again.
    renderSide() {
      if (!this.side.querySelector("#conv-list")) this.buildSide();
      const ul = this.side.querySelector("#conv-list");
      ul.replaceChildren();
      for (const s of this.list) {
        const mine = s.principal === this.principal;
        const current = this.cur && this.cur.id === s.session && this.cur.principal === s.principal;
        const b = el("button", { type: "button", "data-session": s.session, "data-principal": s.principal, "aria-current": current ? "true" : "false", title: s.session },
          el("span", { class: "c-top" },
            el("span", { class: "c-id", text: s.session }),
            el("span", { class: `net net-${s.network}`, text: s.network })),
          el("span", { class: "c-when", title: `last used ${exact(s.last_used)}`, text: `used ${ago(s.last_used)}` },
            mine ? null : el("span", { class: "c-who", text: ` · ${s.principal}` })));
        b.addEventListener("click", () => this.open(s.session, s.principal));
        ul.append(el("li", null, b));
      }
      ul.hidden = !this.list.length;
      this.side.querySelector("#conv-list-empty").hidden = this.list.length > 0;
      this.side.querySelector("#conv-count").textContent = String(this.list.length);
    }

    buildSide() {
      const input = el("input", { id: "conv-new-id", type: "text", spellcheck: "false", autocomplete: "off", maxlength: "128", placeholder: "a new id, or leave empty", "aria-label": "Conversation id" });
      const err = el("p", { id: "conv-new-error", class: "form-error small-text", role: "alert", hidden: true });
      const form = el("form", { id: "conv-new", class: "conv-new", novalidate: true },
        el("div", { class: "conv-new-row" }, input, el("button", { id: "conv-new-open", class: "primary small", type: "submit", text: "Open" })),
        err);
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        const id = input.value.trim() || newID();
        const problem = this.badID(id);
        err.hidden = !problem;
        err.textContent = problem;
        if (problem) return;
        input.value = "";
        this.open(id, this.principal);
      });
      this.side.replaceChildren(
        el("div", { class: "side-section" },
          el("div", { class: "side-head" }, el("h2", { text: "New conversation" })),
          form),
        el("div", { class: "side-section" },
          el("div", { class: "side-head" },
            el("h2", { text: "Conversations" }),
            el("span", { id: "conv-count", class: "count" })),
          el("ul", { id: "conv-list", class: "conv-list", "aria-label": "Conversations" }),
          el("p", { id: "conv-list-empty", class: "muted small-text", text: "No conversations yet. Open one above: it starts with its first run, upload or network change." })));
    }

    badID(id) {
      if (id === "." || id === ".." || !ID_RE.test(id)) return "An id is 1 to 128 letters, digits, '.', '_', ':' or '-' (not '.' or '..').";
      return "";
    }

    // ---- one conversation ----
    // show opens the view: a conversation, or the overview when id is "".
    show(id, principal) {
      if (!this.ok) return;
      if (id) this.open(id, principal || this.principal);
      else if (this.cur) this.open(this.cur.id, this.cur.principal);
      else this.overview();
    }

    overview() {
      this.cur = null;
      this.o.navigate("#conversations");
      this.renderSide();
      this.main.replaceChildren(el("section", { id: "conv-empty", class: "empty card" },
        el("h1", { text: "Conversations" }),
        el("p", { class: "muted", text: "Each conversation has a sandbox of its own whose files in /work stay from one run to the next. Open one on the left, or start a new one: upload files into it, run Python or bash in it, and download what it wrote." })));
    }

    async open(id, principal) {
      const ticket = ++this.ticket;
      const same = this.cur && this.cur.id === id && this.cur.principal === principal;
      if (!same) {
        this.cur = { id, principal, session: null, files: [], runs: [] };
        this.run = null;
      }
      this.o.navigate(`#conv=${encodeURIComponent(id)}${principal !== this.principal ? "&principal=" + encodeURIComponent(principal) : ""}`);
      this.renderSide();
      if (!same) this.render();
      const r = await this.request("GET", this.url(""));
      if (ticket !== this.ticket) return;
      if (r.status === 200) this.cur.session = r.body;
      else if (r.status === 404) this.cur.session = null;
      else return this.alert(r.message);
      this.renderHead();
      await Promise.all([this.loadFiles(ticket), this.loadRuns(ticket)]);
    }

    render() {
      const c = this.cur;
      const own = c.principal === this.principal;
      const netSelect = el("select", { id: "conv-network", "aria-describedby": "conv-network-note" });
      for (const [v, label] of NETWORKS) netSelect.append(el("option", { value: v, text: label }));
      netSelect.addEventListener("change", () => this.setNetwork(netSelect.value));

      const code = el("textarea", { id: "conv-code", rows: "6", spellcheck: "false", placeholder: "print(\"hello from /work\")", "aria-label": "Code to run" });
      code.addEventListener("keydown", (e) => {
        if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
          e.preventDefault();
          e.stopPropagation();
          this.startRun();
        }
      });
      const lang = el("select", { id: "conv-lang", "aria-label": "Language" },
        el("option", { value: "python", text: "Python (run_python)" }),
        el("option", { value: "bash", text: "Bash (run_bash)" }));
      lang.addEventListener("change", () => { code.placeholder = lang.value === "bash" ? "ls -la && wc -l *.txt" : "print(\"hello from /work\")"; });

      const upload = el("input", { id: "conv-upload", type: "file", multiple: true, class: "visually-hidden" });
      upload.addEventListener("change", () => this.upload(upload));

      this.main.replaceChildren(
        el("section", { id: "conv-view", class: "card conv", "aria-label": "Conversation" },
          el("div", { class: "conv-head" },
            el("div", { class: "conv-title" },
              el("h1", { id: "conv-title", text: c.id }),
              el("p", { id: "conv-meta", class: "muted small-text" })),
            el("button", { id: "conv-delete", class: "danger", type: "button", text: "Delete conversation", onclick: () => this.deleteConversation() })),
          el("p", { id: "conv-alert", class: "conv-alert", role: "alert", hidden: true }),
          el("div", { class: "conv-network" },
            el("label", { for: "conv-network", text: "Network" }),
            netSelect,
            el("p", { id: "conv-network-note", class: "help", text: "" }))),
        el("section", { class: "card conv-panel", "aria-label": "Run in this conversation" },
          el("div", { class: "panel-row" },
            el("h2", { text: "Run" }),
            lang),
          code,
          el("div", { class: "actions" },
            el("button", { id: "conv-run", class: "primary", type: "button", text: "Run", onclick: () => this.startRun() }),
            el("button", { id: "conv-cancel", class: "danger", type: "button", text: "Cancel", hidden: true, onclick: () => this.cancelRun() }),
            el("span", { id: "conv-run-status", class: "status", hidden: true }),
            el("span", { id: "conv-run-hint", class: "muted small-text", text: own ? "Ctrl+Enter runs. Files the code writes in /work stay for the next run." : `This is ${c.principal}'s conversation: runs go in your own conversations only.` })),
          el("div", { id: "conv-approval", class: "conv-approval", role: "alert", hidden: true },
            el("strong", { id: "conv-approval-title", text: "This run waits for approval" }),
            el("p", { id: "conv-approval-why" }),
            el("pre", { id: "conv-approval-args", class: "conv-approval-args" }),
            el("div", { class: "actions" },
              el("button", { id: "conv-approve", class: "primary", type: "button", text: "Approve", onclick: () => this.decide("approve") }),
              el("button", { id: "conv-decline", class: "danger", type: "button", text: "Decline", onclick: () => this.decide("decline") }),
              el("span", { id: "conv-approval-note", class: "muted small-text" }))),
          el("div", { class: "output-wrap" },
            el("div", { class: "output-head" }, el("span", { text: "Output" }), el("span", { id: "conv-exit", class: "muted" })),
            el("pre", { id: "conv-output", class: "output stream", "aria-live": "polite" })),
          el("div", { id: "conv-run-error", class: "run-error", role: "alert", hidden: true },
            el("strong", { id: "conv-run-error-title" }),
            el("p", { id: "conv-run-error-message" }),
            el("code", { id: "conv-run-error-code" }))),
        el("section", { class: "card conv-panel", "aria-label": "Files" },
          el("div", { class: "panel-row" },
            el("div", { class: "panel-title" },
              el("h2", { text: "Files in /work" }),
              el("span", { id: "conv-files-count", class: "count" })),
            el("div", { class: "panel-actions" },
              el("button", { id: "conv-files-refresh", class: "ghost small", type: "button", text: "Refresh", onclick: () => this.loadFiles(this.ticket) }),
              upload,
              el("label", { for: "conv-upload", class: "button primary small", text: "Upload files" }))),
          el("p", { id: "conv-upload-status", class: "muted small-text", role: "status", hidden: true }),
          el("div", { class: "table-wrap" },
            el("table", { id: "conv-files", class: "table" },
              el("thead", null, el("tr", null,
                el("th", { text: "Name" }), el("th", { class: "num", text: "Size" }), el("th", { text: "Changed" }), el("th", { class: "act" }, el("span", { class: "visually-hidden", text: "Actions" })))),
              el("tbody"))),
          el("p", { id: "conv-files-empty", class: "muted small-text", text: "" })),
        el("section", { class: "card conv-panel", "aria-label": "Run history" },
          el("div", { class: "panel-row" },
            el("div", { class: "panel-title" },
              el("h2", { text: "Run history" }),
              el("span", { id: "conv-runs-count", class: "count" })),
            el("button", { id: "conv-runs-refresh", class: "ghost small", type: "button", text: "Refresh", onclick: () => this.loadRuns(this.ticket) })),
          el("div", { class: "table-wrap" },
            el("table", { id: "conv-runs", class: "table" },
              el("thead", null, el("tr", null,
                el("th", { text: "Started" }), el("th", { text: "Tool" }), el("th", { class: "num", text: "Took" }),
                el("th", { class: "num", text: "Exit" }), el("th", { text: "Stopped" }), el("th", { class: "num", text: "In / out" }))),
              el("tbody"))),
          el("p", { id: "conv-runs-empty", class: "muted small-text", text: "No runs yet." })));
      $id("conv-run").disabled = !own;
      code.disabled = !own;
      this.renderHead();
    }

    renderHead() {
      const c = this.cur;
      if (!c || !$id("conv-view")) return;
      const s = c.session;
      const meta = $id("conv-meta");
      const own = c.principal === this.principal;
      const who = own ? "" : `${c.principal}'s · `;
      meta.textContent = s
        ? `${who}network ${s.network} · last used ${ago(s.last_used)} · deleted ${ago(s.expires)} unless used before`
        : `${who}new: this conversation starts with its first run, upload or network change.`;
      meta.title = s ? `created ${exact(s.created)}, last used ${exact(s.last_used)}, deleted at ${exact(s.expires)} unless used before` : "";
      const sel = $id("conv-network");
      if (s) sel.value = s.network;
      else if (!sel.dataset.touched) sel.value = "off";
      $id("conv-delete").hidden = !s;
    }

    renderTimes() {
      this.renderSide();
      this.renderHead();
      this.renderFiles();
      this.renderRuns();
    }

    alert(message) {
      const a = $id("conv-alert");
      if (!a) return this.o.toast(message);
      a.textContent = message;
      a.hidden = !message;
    }

    // ---- files ----
    async loadFiles(ticket) {
      const c = this.cur;
      if (!c) return;
      const r = await this.request("GET", this.url("/files"));
      if (ticket !== this.ticket || c !== this.cur) return;
      if (r.status === 200) c.files = r.body.files || [];
      else if (r.status === 404) c.files = [];
      else return this.alert(r.message);
      this.renderFiles();
    }

    renderFiles() {
      const c = this.cur;
      const table = $id("conv-files");
      if (!c || !table) return;
      const tbody = table.tBodies[0];
      tbody.replaceChildren();
      const files = c.files.slice().sort((a, b) => a.path.localeCompare(b.path));
      let total = 0;
      for (const f of files) {
        if (!f.dir) total += f.size;
        const name = el("td", { class: "path" },
          el("span", { class: f.dir ? "fname dir" : "fname", text: f.dir ? `${f.path}/` : f.path }));
        const actions = el("td", { class: "act" });
        if (!f.dir) actions.append(el("button", { class: "ghost small dl", type: "button", text: "Download", title: `Download ${f.path}`, onclick: () => this.download(f.path) }));
        actions.append(el("button", { class: "danger small rm", type: "button", text: "Delete", title: `Delete ${f.path}`, onclick: () => this.deleteFile(f) }));
        tbody.append(el("tr", { "data-path": f.path, "data-dir": f.dir ? "true" : null },
          name,
          el("td", { class: "num", text: f.dir ? "folder" : size(f.size) }),
          el("td", { class: "when", title: exact(f.modified), text: ago(f.modified) }),
          actions));
      }
      $id("conv-files-count").textContent = files.length ? `${files.length} · ${size(total)}` : "";
      table.hidden = !files.length;
      const empty = $id("conv-files-empty");
      empty.hidden = files.length > 0;
      empty.textContent = c.session ? "No files in /work yet. Upload some, or write them from a run." : "No files yet: upload some to start the conversation, or run code that writes them.";
    }

    async upload(input) {
      const c = this.cur;
      const files = Array.from(input.files || []);
      input.value = "";
      if (!c || !files.length) return;
      const status = $id("conv-upload-status");
      status.hidden = false;
      let done = 0;
      const failed = [];
      for (const f of files) {
        status.textContent = `Uploading ${f.name} (${size(f.size)})…`;
        const r = await this.request("PUT", this.url(`/files/${encPath(f.name)}`), f, { "Content-Type": "application/octet-stream" });
        if (c !== this.cur) return;
        if (r.status === 200) done++;
        else failed.push(`${f.name}: ${r.message}`);
      }
      status.textContent = failed.length
        ? `${done ? `Uploaded ${done} file${done === 1 ? "" : "s"}; ` : ""}not uploaded: ${failed.join(" ")}`
        : `Uploaded ${done} file${done === 1 ? "" : "s"}.`;
      status.classList.toggle("form-error", failed.length > 0);
      await this.afterChange();
    }

    async download(path) {
      const r0 = await fetch(this.url(`/files/${encPath(path)}`), { headers: this.headers({ Accept: "*/*" }), cache: "no-store", credentials: "omit" }).catch((e) => ({ ok: false, status: 0, error: e }));
      if (!r0.ok) {
        let msg = r0.error ? `The host could not be reached: ${r0.error.message}.` : `The host answered ${r0.status}.`;
        if (!r0.error) { try { msg = sentence((await r0.json()).error.message); } catch { /* keep */ } }
        this.o.toast(`${path} was not downloaded: ${msg}`);
        return;
      }
      const blob = await r0.blob();
      const url = URL.createObjectURL(blob);
      const a = el("a", { href: url, download: baseName(path), hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    }

    async deleteFile(f) {
      const what = f.dir ? "the folder" : "";
      const ok = await this.confirm(`Delete ${what ? what + " " : ""}${f.path}?`,
        f.dir ? "Only an empty folder can be deleted. The next runs won't find it." : "It is gone from /work for the next runs too; this can't be undone.", "Delete");
      if (!ok) return;
      const r = await this.request("DELETE", this.url(`/files/${encPath(f.path)}`));
      if (r.status !== 204) this.o.toast(`${f.path} was not deleted: ${r.message}`);
      else this.o.toast(`Deleted ${f.path}.`);
      await this.loadFiles(this.ticket);
    }

    // ---- the conversation ----
    async setNetwork(v) {
      const c = this.cur;
      const sel = $id("conv-network");
      const note = $id("conv-network-note");
      sel.dataset.touched = "1";
      sel.disabled = true;
      const r = await this.request("PATCH", this.url(""), JSON.stringify({ network: v }), { "Content-Type": "application/json" });
      if (c !== this.cur) return;
      sel.disabled = false;
      if (r.status === 200) {
        c.session = r.body;
        note.classList.remove("bad");
        note.textContent = `The network is ${v} now: the next run gets a new sandbox with it, on the same files.`;
        this.renderHead();
        this.refreshList();
      } else {
        sel.value = c.session ? c.session.network : "off";
        note.classList.add("bad");
        note.textContent = `The network stays ${sel.value}. ${r.message}`;
      }
    }

    async deleteConversation() {
      const c = this.cur;
      if (!c || !c.session) return;
      const ok = await this.confirm(`Delete the conversation ${c.id}?`,
        "Its sandbox stops (a run going on in it ends) and every file in its /work is deleted at once. The ledger keeps its run history.", "Delete conversation");
      if (!ok || c !== this.cur) return;
      const r = await this.request("DELETE", this.url(""));
      if (r.status !== 204 && r.status !== 404) return this.alert(`The conversation was not deleted: ${r.message}`);
      this.o.toast(`Deleted the conversation ${c.id}.`);
      this.list = this.list.filter((s) => !(s.session === c.id && s.principal === c.principal));
      this.ticket++;
      this.run = null;
      this.overview();
      this.refreshList();
    }

    // afterChange reloads what a run or an upload may have changed.
    async afterChange() {
      const c = this.cur;
      if (!c) return;
      const t = this.ticket;
      const r = await this.request("GET", this.url(""));
      if (t !== this.ticket || c !== this.cur) return;
      if (r.status === 200) c.session = r.body;
      this.renderHead();
      await Promise.all([this.loadFiles(t), this.loadRuns(t), this.refreshList()]);
    }

    // ---- the run history ----
    async loadRuns(ticket) {
      const c = this.cur;
      if (!c) return;
      const q = new URLSearchParams({ session: c.id, limit: "100" });
      if (this.role === "admin") q.set("principal", c.principal);
      const r = await this.request("GET", `/api/v1/runs?${q}`);
      if (ticket !== this.ticket || c !== this.cur) return;
      if (r.status !== 200) return this.alert(r.message);
      c.runs = r.body.runs || [];
      this.renderRuns();
    }

    renderRuns() {
      const c = this.cur;
      const table = $id("conv-runs");
      if (!c || !table) return;
      const tbody = table.tBodies[0];
      tbody.replaceChildren();
      const created = c.session ? Date.parse(c.session.created) - 1000 : Infinity;
      let earlier = 0;
      for (const r of c.runs) {
        const before = Date.parse(r.started) < created;
        if (before) earlier++;
        const stopped = r.stopped
          ? el("span", { class: "badge stop", text: r.stopped })
          : el("span", { class: "muted", text: "ran to its end" });
        const exit = r.exit_code === null || r.exit_code === undefined ? el("span", { class: "muted", text: "—" }) : el("span", { class: r.exit_code === 0 ? "exit ok" : "exit bad", text: String(r.exit_code) });
        tbody.append(el("tr", { "data-run": r.run, class: before ? "earlier" : null, title: before ? "a run of an earlier conversation of this id" : `run ${r.run}` },
          el("td", { class: "when", title: exact(r.started), text: ago(r.started) }),
          el("td", null, el("span", { class: "mono", text: r.tool }), r.language ? el("span", { class: "muted small-text", text: ` ${r.language}` }) : null),
          el("td", { class: "num", text: took(r.duration_ms) }),
          el("td", { class: "num" }, exit),
          el("td", null, stopped),
          el("td", { class: "num", text: `${size(r.bytes_in)} / ${size(r.bytes_out)}` })));
      }
      $id("conv-runs-count").textContent = c.runs.length ? String(c.runs.length) : "";
      table.hidden = !c.runs.length;
      const empty = $id("conv-runs-empty");
      empty.hidden = c.runs.length > 0 && !earlier;
      empty.textContent = !c.runs.length ? "No runs yet." : `${earlier} of these ran in an earlier conversation of the same id, since deleted.`;
    }

    // ---- running ----
    owns(id) { return typeof id === "string" && id.startsWith("conv-"); }

    startRun() {
      const c = this.cur;
      if (!c || c.principal !== this.principal || (this.run && (this.run.state === "running" || this.run.state === "waiting"))) return;
      const code = $id("conv-code").value;
      const lang = $id("conv-lang").value;
      if (!code.trim()) {
        $id("conv-code").focus();
        return;
      }
      const id = `conv-${Date.now().toString(36)}-${this.next++}`;
      const tool = lang === "bash" ? "run_bash" : "run_python";
      this.run = { id, run: "", tool, lastSeq: -1, state: "running", chunks: 0, streamed: false, conv: c, started: Date.now(), approval: "", approveID: "" };
      $id("conv-output").replaceChildren();
      $id("conv-exit").textContent = "";
      $id("conv-run-error").hidden = true;
      this.setRunState("running");
      const args = lang === "bash" ? { command: code } : { code };
      this.o.send({ type: "call", id, tool, args, session: c.id });
    }

    cancelRun() {
      const r = this.run;
      if (!r || (r.state !== "running" && r.state !== "waiting")) return;
      $id("conv-cancel").disabled = true;
      this.o.send(r.run ? { type: "cancel", id: r.id, run: r.run } : { type: "cancel", id: r.id });
    }

    setRunState(s) {
      const r = this.run;
      r.state = s;
      const st = $id("conv-run-status");
      if (!st) return;
      st.hidden = false;
      st.dataset.state = s;
      st.textContent = { running: "running", waiting: "waiting for approval", done: "done", failed: "failed", cancelled: "cancelled" }[s];
      const going = s === "running" || s === "waiting";
      $id("conv-run").disabled = going;
      $id("conv-cancel").hidden = !going;
      $id("conv-cancel").disabled = false;
      if (s !== "waiting") $id("conv-approval").hidden = true;
    }

    // asked shows that the run waits for a person to approve it (the
    // host's [approvals]): why, and the exact arguments waiting.
    asked(f) {
      const r = this.run;
      r.approval = f.approval;
      const args = f.args && typeof f.args === "object" ? f.args : {};
      const shown = typeof args.code === "string" ? args.code : typeof args.command === "string" ? args.command : JSON.stringify(f.args, null, 2);
      $id("conv-approval-title").textContent = f.tool && f.tool !== r.tool ? `${f.tool}, called by this run, waits for approval` : "This run waits for approval";
      $id("conv-approval-why").textContent = sentence(f.why || "runs of tools that change things wait for a person to approve them on this host");
      $id("conv-approval-args").textContent = shown || "";
      $id("conv-approval-note").textContent = "";
      $id("conv-approve").disabled = false;
      $id("conv-decline").disabled = false;
      $id("conv-approval").hidden = false;
      this.setRunState("waiting");
    }

    decide(decision) {
      const r = this.run;
      if (!r || !r.approval || r.state !== "waiting") return;
      r.approveID = `conv-approve-${this.next++}`;
      $id("conv-approve").disabled = true;
      $id("conv-decline").disabled = true;
      $id("conv-approval-note").textContent = decision === "approve" ? "Approving…" : "Declining…";
      this.o.send({ type: "approve", id: r.approveID, approval: r.approval, decision });
    }

    // onDecided is the host's answer to approve.
    onDecided(f) {
      const r = this.run;
      if (f.type === "decided") {
        r.approval = "";
        if (r.state === "waiting") this.setRunState("running");
        return;
      }
      if (f.type === "error" && r.state === "waiting") {
        $id("conv-approve").disabled = false;
        $id("conv-decline").disabled = false;
        $id("conv-approval-note").textContent = sentence((f.error && f.error.message) || "The host did not take the decision.");
      }
    }

    // resume picks a run up after the websocket came back.
    resume() {
      const r = this.run;
      if (r && (r.state === "running" || r.state === "waiting") && r.run) this.o.send({ type: "attach", id: r.id, run: r.run, after_seq: r.lastSeq });
    }

    onFrame(f) {
      const r = this.run;
      if (r && r.approveID && f.id === r.approveID && r.conv === this.cur) return this.onDecided(f);
      if (!r || f.id !== r.id || r.conv !== this.cur) return;
      if (f.type === "behind") {
        this.o.send({ type: "attach", id: r.id, run: r.run, after_seq: r.lastSeq });
        return;
      }
      if (f.type === "error" && (f.seq === undefined || !f.run)) {
        // Refused before it ran.
        if (r.state !== "running" && r.state !== "waiting") return;
        this.showError(f.error, f.error && f.error.code === "bad_args" ? "The call was refused" : "The run could not start");
        this.setRunState("failed");
        return;
      }
      if (f.seq <= r.lastSeq) return;
      r.lastSeq = f.seq;
      const out = $id("conv-output");
      const near = out && out.scrollHeight - out.scrollTop - out.clientHeight < 40;
      switch (f.type) {
        case "started":
          r.run = f.run;
          break;
        case "approval_required":
          this.asked(f);
          break;
        case "stdout":
        case "stderr":
          // Approved elsewhere (another tab, the approvals list): it runs.
          if (r.state === "waiting") this.setRunState("running");
          r.streamed = true;
          this.print(f.type, f.data);
          break;
        case "display":
          if (r.state === "waiting") this.setRunState("running");
          r.streamed = true;
          for (const part of f.content || []) this.show(part);
          break;
        case "result": {
          const res = f.result && typeof f.result === "object" ? f.result : {};
          if (!r.streamed) {
            if (res.stdout) this.print("stdout", res.stdout);
            if (res.stderr) this.print("stderr", res.stderr);
            for (const part of f.content || []) if (part.type === "image") this.show(part);
          }
          // A python cell's value, as a notebook shows it, and what the sandbox says of its
          // interpreter (restarted, or new after a stop).
          if (typeof res.value === "string" && res.value !== "") this.print("value", res.value + "\n");
          if (res.message && !res.stopped) this.print("note", res.message + "\n");
          const code = res.exit_code;
          const secs = ((Date.now() - r.started) / 1000).toFixed(1);
          $id("conv-exit").textContent = typeof code === "number" ? `exit code ${code} · ${secs} s` : `${secs} s`;
          if (res.stopped) this.showError({ message: res.message || `stopped: ${res.stopped}`, code: res.stopped }, "The sandbox stopped the run");
          this.setRunState(res.stopped || (typeof code === "number" && code !== 0) ? "failed" : "done");
          this.afterChange();
          break;
        }
        case "error":
          this.showError(f.error, f.error && f.error.code === "cancelled" ? "Cancelled" : "The run failed");
          this.setRunState(f.error && f.error.code === "cancelled" ? "cancelled" : "failed");
          this.afterChange();
          break;
      }
      if (out && near) out.scrollTop = out.scrollHeight;
    }

    print(type, data) {
      this.append(el("span", { class: `line ${type}`, text: data }));
    }

    // show draws a part the run showed (an image) in the output, in order with what it printed.
    show(part) {
      this.append(shownPart(part));
    }

    append(node) {
      const out = $id("conv-output");
      if (!out) return;
      out.append(node);
      if (out.children.length > MAX_SHOWN) {
        let note = out.querySelector(".trimmed");
        if (!note) {
          note = el("span", { class: "line note trimmed", text: "Earlier output is not shown here.\n" });
          out.prepend(note);
        }
        while (out.children.length > MAX_SHOWN + 1) note.nextSibling.remove();
      }
    }

    showError(e, title) {
      $id("conv-run-error-title").textContent = title;
      $id("conv-run-error-message").textContent = sentence((e && e.message) || "The run ended with an error.");
      $id("conv-run-error-code").textContent = e && e.code ? `code: ${e.code}` : "";
      $id("conv-run-error").hidden = false;
    }

    // ---- confirming ----
    // confirm asks in a dialog of the page and answers true for yes.
    confirm(title, text, yes) {
      if (!this.dialog) {
        this.dialog = el("dialog", { id: "confirm-dialog", class: "confirm", "aria-labelledby": "confirm-title" },
          el("form", { method: "dialog" },
            el("h2", { id: "confirm-title" }),
            el("p", { id: "confirm-text", class: "muted" }),
            el("div", { class: "confirm-actions" },
              el("button", { id: "confirm-no", class: "ghost", value: "no", text: "Keep" }),
              el("button", { id: "confirm-yes", class: "danger solid", value: "yes" }))));
        document.body.append(this.dialog);
      }
      const d = this.dialog;
      d.querySelector("#confirm-title").textContent = title;
      d.querySelector("#confirm-text").textContent = text;
      d.querySelector("#confirm-yes").textContent = yes;
      d.returnValue = "";
      return new Promise((resolve) => {
        d.addEventListener("close", () => resolve(d.returnValue === "yes"), { once: true });
        d.showModal();
        d.querySelector("#confirm-no").focus();
      });
    }
  }

  function $id(id) { return document.getElementById(id); }

  window.ToolhostConversations = ToolhostConversations;
  // The run view (app.js) draws the parts its runs show the same way.
  window.ToolhostConversations.shownPart = shownPart;
})();
