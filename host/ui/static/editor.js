// toolhost web UI: the editor of graph and prompt tools. A graph is drawn
// as absolutely positioned node boxes with SVG wires; a prompt tool is a
// form with its {{placeholders}} marked. Plain JS, no build step, no
// library: app.js makes one with new ToolhostEditor(host) and opens a tool
// in it. The format edited is docs' graph format: nodes name their inputs
// by node id, and run.layout keeps where each is drawn.
"use strict";

(() => {
  const NODE_TYPES = ["arg", "const", "template", "pick", "join", "choose", "ask_model", "call_tool", "return"];
  const TYPE_HELP = {
    arg: "one of the tool's parameters",
    const: "a fixed value",
    template: "text with {{node}} placeholders",
    pick: "what is at a path in a JSON value",
    join: "several values joined as text",
    choose: "one of two values, on a test",
    ask_model: "the model's answer to a prompt",
    call_tool: "the result of another tool",
    return: "the tool's result",
  };
  const PARAM_KINDS = ["text", "number", "integer", "bool", "json", "list"];
  const ID_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
  const NAME_RE = /^[a-z][a-z0-9_]{0,40}$/;
  const NODE_W = 160;
  const COL_W = 210;
  const ROW_H = 130;
  const MARGIN = 20;

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
  const svg = (tag, attrs) => {
    const n = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    return n;
  };
  const clone = (v) => JSON.parse(JSON.stringify(v));
  const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

  // parseTemplate splits a text into literal pieces and placeholders the
  // way the host does: "{{" starts one, the next "}}" ends it, spaces
  // inside are allowed. {lit} | {raw, name} | {raw, unclosed: true}.
  function parseTemplate(text) {
    const out = [];
    let rest = String(text || "");
    for (;;) {
      const i = rest.indexOf("{{");
      if (i < 0) {
        if (rest) out.push({ lit: rest });
        return out;
      }
      if (i > 0) out.push({ lit: rest.slice(0, i) });
      const j = rest.indexOf("}}", i + 2);
      if (j < 0) {
        out.push({ raw: rest.slice(i), unclosed: true });
        return out;
      }
      out.push({ raw: rest.slice(i, j + 2), name: rest.slice(i + 2, j).trim() });
      rest = rest.slice(j + 2);
    }
  }

  // placeholders lists the {{names}} of a text, in order, each once.
  function placeholders(text) {
    const out = [];
    for (const p of parseTemplate(text)) if (p.name !== undefined && !out.includes(p.name)) out.push(p.name);
    return out;
  }

  // renamePlaceholder rewrites {{from}} as {{to}} in a text.
  function renamePlaceholder(text, from, to) {
    return parseTemplate(text).map((p) => (p.name === from ? `{{${to}}}` : p.lit !== undefined ? p.lit : p.raw)).join("");
  }

  // marked renders text with each {{name}} a mark: known ones as such,
  // unknown or malformed ones as errors.
  function marked(text, known, what) {
    const frag = document.createDocumentFragment();
    for (const p of parseTemplate(text)) {
      if (p.lit !== undefined) {
        frag.append(p.lit);
        continue;
      }
      const ok = !p.unclosed && known.has(p.name);
      const why = p.unclosed ? "this placeholder is never closed with }}" : `there is no ${what} named "${p.name}"`;
      frag.append(el("mark", { class: ok ? "ph" : "ph bad", title: ok ? `${what} ${p.name}` : why, text: p.raw }));
    }
    return frag;
  }

  // paramOf reads a param as the API gives it (lower or Go-style keys).
  function paramOf(p) {
    const g = (k) => (p[k] !== undefined ? p[k] : p[k[0].toUpperCase() + k.slice(1)]);
    return {
      name: g("name") || "",
      kind: g("kind") || "text",
      description: g("description") || "",
      required: !!g("required"),
      options: (g("options") || []).map(String),
    };
  }

  // literal editing: a value is written as text or as JSON.
  function literalMode(v) {
    return typeof v === "string" ? "text" : "json";
  }

  class ToolhostEditor {
    // host: {root, role(), editable, request(method, path, body), tools(),
    // toast(text), saved(name)}
    constructor(host) {
      this.host = host;
      this.root = host.root;
      this.ed = null;
      this.drag = null;
      this.root.addEventListener("keydown", (e) => this.onKey(e));
    }

    // ---- opening ----
    hide() {
      this.ed = null;
      this.root.hidden = true;
      this.root.replaceChildren();
    }

    // open shows a tool's definition {name, description, effect, params,
    // run}. opts: {isNew, editable}.
    open(def, opts) {
      const run = clone(def.run || {});
      const kind = run.type === "prompt" ? "prompt" : "graph";
      if (kind === "graph") {
        run.nodes = Array.isArray(run.nodes) ? run.nodes : [];
        run.layout = run.layout && typeof run.layout === "object" ? run.layout : {};
      }
      this.ed = {
        kind,
        isNew: !!opts.isNew,
        editable: !!opts.editable,
        source: def.source || "",
        def: {
          name: def.name || "",
          description: def.description || "",
          effect: def.effect || "read",
          params: (def.params || []).map(paramOf),
          run,
        },
        selected: null,
        errors: null,
        dirty: !!opts.isNew,
        why: opts.why || "",
        status: opts.isNew ? "Not saved yet." : "",
      };
      this.root.hidden = false;
      this.render();
    }

    // newGraph opens a new graph tool: one arg wired to a return.
    newGraph() {
      this.open({
        name: "",
        description: "",
        effect: "read",
        params: [{ name: "input", kind: "text", required: true, description: "" }],
        run: {
          type: "graph",
          nodes: [{ id: "input", type: "arg", param: "input" }, { id: "out", type: "return", value: "input" }],
          layout: { input: { x: MARGIN, y: MARGIN }, out: { x: MARGIN + COL_W * 2, y: MARGIN } },
        },
      }, { isNew: true, editable: true });
    }

    newPrompt() {
      this.open({
        name: "",
        description: "",
        effect: "read",
        params: [{ name: "text", kind: "text", required: true, description: "" }],
        run: { type: "prompt", system: "", prompt: "{{text}}", format: "text" },
      }, { isNew: true, editable: true });
    }

    message(text) {
      this.ed = null;
      this.root.hidden = false;
      this.root.replaceChildren(el("p", { class: "muted def-message", text }));
    }

    // ---- the whole card ----
    render() {
      const ed = this.ed;
      const ro = !ed.editable;
      const title = ed.isNew ? (ed.kind === "graph" ? "New graph tool" : "New prompt tool") : (ed.kind === "graph" ? "Graph" : "Prompt");
      const status = el("span", { id: "def-status", class: "muted small-text", role: "status", text: ed.status || (ro ? ed.why : "") });
      const actions = el("div", { class: "def-actions" });
      if (!ro) {
        actions.append(
          el("button", { id: "def-check", class: "ghost", type: "button", text: "Check", onclick: () => this.check() }),
          el("button", { id: "def-save", class: "primary", type: "button", text: "Save", onclick: () => this.save() }));
      } else {
        actions.append(el("span", { id: "def-readonly", class: "badge", text: "read only", title: ed.why }));
      }
      const head = el("div", { class: "def-head" },
        el("div", { class: "def-title" }, el("h2", { id: "def-title", text: title }), ed.source ? el("code", { class: "muted small-text", title: ed.source, text: ed.source.split("/").pop() }) : null),
        el("div", { class: "def-right" }, status, actions));
      this.errorsBox = el("div", { id: "def-errors", class: "def-errors", role: "alert", hidden: true });
      this.metaBox = el("div", { id: "def-meta", class: "def-meta" });
      this.bodyBox = el("div", { class: "def-body" });
      this.root.replaceChildren(head, this.errorsBox, this.metaBox, this.bodyBox);
      this.renderMeta();
      if (ed.kind === "graph") this.renderGraphEditor();
      else this.renderPrompt();
      this.renderErrors();
    }

    setStatus(text) {
      if (!this.ed) return;
      this.ed.status = text;
      const s = this.root.querySelector("#def-status");
      if (s) s.textContent = text;
    }

    changed() {
      this.ed.dirty = true;
      this.setStatus("Unsaved changes.");
    }

    // ---- name, description, effect, params ----
    renderMeta() {
      const ed = this.ed;
      const d = ed.def;
      const ro = !ed.editable;
      const box = this.metaBox;
      box.replaceChildren();
      const name = el("input", { id: "def-name", type: "text", value: d.name, spellcheck: "false", autocomplete: "off", placeholder: "my_tool", disabled: ro || !ed.isNew, "data-meta": "name" });
      name.addEventListener("input", () => { d.name = name.value.trim(); this.changed(); });
      const desc = el("textarea", { id: "def-description", class: "text", rows: "2", disabled: ro, "data-meta": "description" });
      desc.value = d.description;
      desc.addEventListener("input", () => { d.description = desc.value; this.changed(); });
      const effect = el("select", { id: "def-effect", disabled: ro, "data-meta": "effect" },
        el("option", { value: "read", text: "read: runs at once" }),
        el("option", { value: "change", text: "change: changes things" }));
      effect.value = d.effect;
      effect.addEventListener("change", () => { d.effect = effect.value; this.changed(); });
      box.append(
        el("div", { class: "meta-row" },
          this.fieldWrap("name", el("label", { for: "def-name", text: "Name" }), name, ed.isNew ? null : "A saved tool keeps its name."),
          this.fieldWrap("effect", el("label", { for: "def-effect", text: "Effect" }), effect)),
        this.fieldWrap("description", el("label", { for: "def-description", text: "Description" }), desc));

      const list = el("div", { class: "params", id: "def-params" });
      d.params.forEach((p, i) => list.append(this.paramRow(p, i)));
      if (!d.params.length) list.append(el("p", { class: "muted small-text", text: "No parameters." }));
      const ph = el("div", { class: "params-head" }, el("h3", { text: "Parameters" }));
      if (!ro) {
        ph.append(el("button", {
          id: "add-param", class: "ghost small", type: "button", text: "Add parameter",
          onclick: () => {
            let n = d.params.length + 1;
            while (d.params.some((p) => p.name === `param${n}`)) n++;
            d.params.push({ name: `param${n}`, kind: "text", description: "", required: false, options: [] });
            this.changed();
            this.renderMeta();
            this.refreshBody();
          },
        }));
      }
      box.append(el("div", { class: "params-wrap" }, ph, list));
    }

    paramRow(p, i) {
      const ro = !this.ed.editable;
      const id = (k) => `param-${i}-${k}`;
      const name = el("input", { id: id("name"), type: "text", value: p.name, spellcheck: "false", disabled: ro });
      name.addEventListener("input", () => { p.name = name.value.trim(); this.changed(); this.refreshBody(); });
      const kind = el("select", { id: id("kind"), disabled: ro }, ...PARAM_KINDS.map((k) => el("option", { value: k, text: k })));
      kind.value = p.kind;
      kind.addEventListener("change", () => { p.kind = kind.value; this.changed(); });
      const req = el("input", { id: id("required"), type: "checkbox", disabled: ro });
      req.checked = p.required;
      req.addEventListener("change", () => { p.required = req.checked; this.changed(); this.refreshBody(); });
      const desc = el("input", { id: id("description"), type: "text", value: p.description, disabled: ro });
      desc.addEventListener("input", () => { p.description = desc.value; this.changed(); });
      const opts = el("input", { id: id("options"), type: "text", value: (p.options || []).join(", "), disabled: ro, placeholder: "any value" });
      opts.addEventListener("input", () => {
        p.options = opts.value.split(",").map((s) => s.trim()).filter((s) => s);
        this.changed();
      });
      const row = el("div", { class: "param-row", "data-param-row": String(i) },
        el("div", { class: "pf" }, el("label", { for: id("name"), text: "Name" }), name),
        el("div", { class: "pf" }, el("label", { for: id("kind"), text: "Kind" }), kind),
        el("div", { class: "pf pf-check" }, el("label", { for: id("required"), text: "Required" }), req),
        el("div", { class: "pf pf-wide" }, el("label", { for: id("description"), text: "Description" }), desc),
        el("div", { class: "pf" }, el("label", { for: id("options"), text: "Options" }), opts));
      if (!ro) {
        row.append(el("button", {
          class: "ghost small param-remove", type: "button", text: "Remove", "aria-label": `Remove parameter ${p.name}`,
          onclick: () => {
            this.ed.def.params.splice(i, 1);
            this.changed();
            this.renderMeta();
            this.refreshBody();
          },
        }));
      }
      row.append(el("p", { class: "field-error", "data-error-for": `params[${i}]`, hidden: true }));
      return row;
    }

    fieldWrap(key, label, input, help) {
      return el("div", { class: "field", "data-def-field": key }, label, input,
        help ? el("p", { class: "help", text: help }) : null,
        el("p", { class: "field-error", "data-error-for": key, hidden: true }));
    }

    // refreshBody redraws what depends on the params (arg choices,
    // prompt placeholder marks) without touching the meta form.
    refreshBody() {
      if (this.ed.kind === "graph") {
        this.renderCanvas();
        this.renderPanel();
      } else {
        this.renderPromptMarks();
      }
    }

    // ---- the graph ----
    nodes() { return this.ed.def.run.nodes; }
    node(id) { return this.nodes().find((n) => n.id === id); }

    renderGraphEditor() {
      const ro = !this.ed.editable;
      const box = this.bodyBox;
      box.replaceChildren();
      if (!ro) {
        const palette = el("div", { id: "palette", class: "palette", role: "toolbar", "aria-label": "Add a node" },
          el("span", { class: "palette-label", text: "Add" }));
        for (const t of NODE_TYPES) {
          palette.append(el("button", {
            type: "button", class: "ghost small", "data-add": t, title: `Add a ${t} node: ${TYPE_HELP[t]}`, text: t,
            onclick: () => this.addNode(t),
          }));
        }
        box.append(palette);
      }
      this.stage = el("div", { id: "graph", class: "graph-stage" });
      this.wires = svg("svg", { class: "wires", "aria-hidden": "true" });
      // Labels are drawn above the nodes, so a short wire keeps its label.
      this.labels = svg("svg", { class: "wires labels", "aria-hidden": "true" });
      this.stage.append(this.wires, this.labels);
      this.scroller = el("div", { class: "graph", role: "group", "aria-label": "The tool's graph" }, this.stage);
      this.panel = el("aside", { id: "node-panel", class: "node-panel", "aria-label": "Node settings" });
      box.append(el("div", { class: "graph-wrap" }, this.scroller, this.panel));
      this.renderCanvas();
      this.renderPanel();
    }

    // positions: run.layout, and for nodes without one a place in the
    // column of their depth (how many references lead to them).
    positions() {
      const nodes = this.nodes();
      const layout = this.ed.def.run.layout;
      const byId = new Map(nodes.map((n) => [n.id, n]));
      const depth = new Map();
      const depthOf = (n, seen) => {
        if (depth.has(n.id)) return depth.get(n.id);
        if (seen.has(n.id)) return 0;
        seen.add(n.id);
        let d = 0;
        for (const r of this.refs(n)) {
          const from = byId.get(r.from);
          if (from) d = Math.max(d, depthOf(from, seen) + 1);
        }
        seen.delete(n.id);
        depth.set(n.id, d);
        return d;
      };
      const pos = new Map();
      const rows = new Map();
      for (const n of nodes) {
        const l = layout[n.id];
        if (l && Number.isFinite(l.x) && Number.isFinite(l.y)) {
          pos.set(n.id, { x: Math.min(Math.max(0, l.x), 20000), y: Math.min(Math.max(0, l.y), 20000) });
          continue;
        }
        const d = depthOf(n, new Set());
        const row = rows.get(d) || 0;
        rows.set(d, row + 1);
        pos.set(n.id, { x: MARGIN + d * COL_W, y: MARGIN + row * ROW_H, auto: true });
      }
      return pos;
    }

    // refs lists what a node reads: {from, label, slot}.
    refs(n) {
      return this.slots(n).filter((s) => s.ref).map((s) => ({ from: s.ref, label: s.wire || s.label, slot: s.key }));
    }

    // slots are a node's inputs, each a port on the canvas.
    slots(n) {
      switch (n.type) {
        case "pick": return [{ key: "from", label: "from", ref: n.from }];
        case "choose": return ["if", "then", "else"].map((k) => ({ key: k, label: k, ref: n[k] }));
        case "ask_model": return [{ key: "prompt", label: "prompt", ref: n.prompt }];
        case "return": return [{ key: "value", label: "value", ref: n.value }];
        case "template":
          return placeholders(n.text).map((p) => ({ key: `ph:${p}`, label: `{{${p}}}`, wire: "text", ref: p }))
            .concat([{ key: "ph+", label: "+ placeholder", add: true }]);
        case "join":
          return (Array.isArray(n.inputs) ? n.inputs : []).map((r, i) => ({ key: `in:${i}`, label: `inputs[${i}]`, wire: "inputs", ref: r }))
            .concat([{ key: "in+", label: "+ input", add: true }]);
        case "call_tool": {
          const args = n.args && typeof n.args === "object" ? n.args : {};
          const spec = this.toolSpec(n.tool);
          const names = spec ? Object.keys(spec.props) : [];
          for (const k of Object.keys(args)) if (!names.includes(k)) names.push(k);
          return names.map((p) => ({ key: `arg:${p}`, label: p, ref: args[p] || "", required: spec && spec.required.has(p) }));
        }
        default: return [];
      }
    }

    toolSpec(name) {
      const t = (this.host.tools() || []).find((x) => x.function && x.function.name === name);
      if (!t) return null;
      const ps = t.function.parameters || {};
      return { props: ps.properties || {}, required: new Set(ps.required || []) };
    }

    summary(n) {
      switch (n.type) {
        case "arg": return n.param ? `param ${n.param}` : "no param chosen";
        case "const": return short(JSON.stringify(n.value === undefined ? null : n.value), 60);
        case "template": return short(n.text || "", 80);
        case "pick": return n.path ? `path ${n.path}` : "no path";
        case "join": return `separator ${JSON.stringify(n.separator === undefined ? "\n" : n.separator)}`;
        case "choose": return n.equals !== undefined ? `if = ${short(JSON.stringify(n.equals), 40)}` : "if true";
        case "ask_model": return `${n.format || "text"}${n.system ? " · " + short(n.system, 50) : ""}`;
        case "call_tool": return n.tool ? `tool ${n.tool}` : "no tool chosen";
        default: return "";
      }
    }

    renderCanvas() {
      const ed = this.ed;
      if (!ed || ed.kind !== "graph" || !this.stage) return;
      const ro = !ed.editable;
      const pos = this.positions();
      this.pos = pos;
      for (const old of this.stage.querySelectorAll(".gnode")) old.remove();
      const ids = new Set(this.nodes().map((n) => n.id));
      let w = 0;
      let h = 0;
      for (const n of this.nodes()) {
        const p = pos.get(n.id);
        w = Math.max(w, p.x + NODE_W + MARGIN * 3);
        h = Math.max(h, p.y + ROW_H + MARGIN * 3);
        const errs = (ed.errors && ed.errors.nodes.get(n.id)) || [];
        const head = el("button", {
          type: "button", class: "gnode-head", "data-node-head": n.id,
          "aria-pressed": ed.selected === n.id ? "true" : "false",
          "aria-label": `${n.type} node ${n.id}${errs.length ? ", has errors" : ""}`,
          title: ro ? "Show this node's settings" : "Select; drag to move; arrow keys move, Delete removes",
        }, el("span", { class: "gtype", text: n.type }), el("span", { class: "gid", text: n.id }));
        const box = el("div", {
          class: `gnode${ed.selected === n.id ? " selected" : ""}${errs.length ? " has-error" : ""}`,
          "data-node": n.id, "data-type": n.type,
        }, head);
        box.style.left = `${p.x}px`;
        box.style.top = `${p.y}px`;
        const slots = this.slots(n);
        if (slots.length) {
          const ul = el("ul", { class: "gslots" });
          for (const s of slots) {
            const missing = s.ref && !ids.has(s.ref);
            ul.append(el("li", { class: `gslot${s.add ? " add" : ""}${missing ? " missing" : ""}${!s.ref && !s.add ? " empty" : ""}`, "data-slot": s.key },
              el("span", { class: "port port-in", "data-port-node": n.id, "data-port-slot": s.key, "aria-hidden": "true" }),
              el("span", { class: "slabel", text: s.label }),
              s.add ? null : el("span", { class: "sref", text: s.ref ? (missing ? `${s.ref}?` : s.ref) : (s.required ? "required" : "—") })));
          }
          box.append(ul);
        }
        const sum = this.summary(n);
        if (sum) box.append(el("p", { class: "gsummary", text: sum }));
        for (const e of errs.slice(0, 2)) box.append(el("p", { class: "gerror", text: e.message }));
        if (errs.length > 2) box.append(el("p", { class: "gerror", text: `and ${errs.length - 2} more` }));
        if (n.type !== "return") {
          box.append(el("span", { class: "port port-out", "data-port-out": n.id, "aria-hidden": "true", title: ro ? "" : "Drag to an input to wire" }));
        }
        head.addEventListener("click", () => this.select(n.id));
        if (!ro) {
          head.addEventListener("pointerdown", (e) => this.startMove(e, n.id, box));
          const out = box.querySelector(".port-out");
          if (out) out.addEventListener("pointerdown", (e) => this.startWire(e, n.id));
        }
        this.stage.append(box);
      }
      this.stage.append(this.labels);
      this.stage.style.width = `${Math.max(w, 600)}px`;
      this.stage.style.height = `${Math.max(h, 380)}px`;
      this.drawWires();
    }

    // portPoint is a port's centre in the stage's coordinates.
    portPoint(port) {
      const s = this.stage.getBoundingClientRect();
      const r = port.getBoundingClientRect();
      return { x: r.left + r.width / 2 - s.left, y: r.top + r.height / 2 - s.top };
    }

    drawWires() {
      const g = this.wires;
      const labels = this.labels;
      g.replaceChildren();
      labels.replaceChildren();
      for (const x of [g, labels]) {
        x.setAttribute("width", this.stage.style.width.replace("px", "") || "600");
        x.setAttribute("height", this.stage.style.height.replace("px", "") || "380");
      }
      for (const n of this.nodes()) {
        for (const r of this.refs(n)) {
          const out = this.stage.querySelector(`[data-port-out="${CSS.escape(r.from)}"]`);
          const inp = this.stage.querySelector(`[data-node="${CSS.escape(n.id)}"] [data-port-slot="${CSS.escape(r.slot)}"]`);
          if (!out || !inp) continue;
          const a = this.portPoint(out);
          const b = this.portPoint(inp);
          const sel = this.ed.selected === n.id || this.ed.selected === r.from;
          const path = svg("path", { d: curve(a, b), class: `wire${sel ? " selected" : ""}`, "data-wire": `${r.from}->${n.id}.${r.slot}` });
          const label = svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 6, class: "wire-label", "text-anchor": "middle" });
          label.textContent = r.label;
          g.append(path);
          labels.append(label);
        }
      }
      if (this.drag && this.drag.kind === "wire" && this.drag.to) {
        g.append(svg("path", { d: curve(this.drag.from, this.drag.to), class: "wire drafting" }));
      }
    }

    select(id) {
      this.ed.selected = id;
      for (const b of this.stage.querySelectorAll(".gnode")) {
        const on = b.dataset.node === id;
        b.classList.toggle("selected", on);
        b.querySelector(".gnode-head").setAttribute("aria-pressed", on ? "true" : "false");
      }
      this.drawWires();
      this.renderPanel();
    }

    // ---- editing the graph ----
    freeId(type) {
      const base = type === "return" ? "out" : type;
      for (let i = 1; ; i++) {
        const id = `${base}${i}`;
        if (!this.node(id)) return id;
      }
    }

    addNode(type) {
      const id = this.freeId(type);
      const n = { id, type };
      const params = this.ed.def.params;
      switch (type) {
        case "arg": n.param = params.length ? params[0].name : ""; break;
        case "const": n.value = ""; break;
        case "template": n.text = ""; break;
        case "pick": n.from = ""; n.path = ""; break;
        case "join": n.inputs = []; n.separator = "\n"; break;
        case "choose": n.if = ""; n.then = ""; n.else = ""; break;
        case "ask_model": n.prompt = ""; n.system = ""; n.format = "text"; break;
        case "call_tool": n.tool = ""; n.args = {}; break;
        case "return": n.value = ""; break;
      }
      // Place it in the first free place of the grid in view, else below
      // everything.
      const pos = this.positions();
      const free = (x, y) => [...pos.values()].every((p) => Math.abs(p.x - x) >= NODE_W + 10 || Math.abs(p.y - y) >= ROW_H - 30);
      let x = MARGIN;
      let y = MARGIN;
      const sc = this.scroller;
      const left = sc ? sc.scrollLeft : 0;
      const top = sc ? sc.scrollTop : 0;
      const cols = sc ? Math.max(1, Math.floor((sc.clientWidth - MARGIN) / COL_W)) : 3;
      const rows = sc ? Math.max(1, Math.floor((sc.clientHeight - MARGIN) / ROW_H)) : 3;
      let found = false;
      for (let r = 0; r < rows && !found; r++) {
        for (let c = 0; c < cols && !found; c++) {
          const cx = left - (left % COL_W) + MARGIN + c * COL_W;
          const cy = top - (top % ROW_H) + MARGIN + r * ROW_H;
          if (free(cx, cy)) {
            x = cx;
            y = cy;
            found = true;
          }
        }
      }
      if (!found) y = Math.max(MARGIN, ...[...pos.values()].map((p) => p.y + ROW_H));
      this.nodes().push(n);
      this.ed.def.run.layout[id] = { x: Math.round(x), y: Math.round(y) };
      this.changed();
      this.ed.selected = id;
      this.renderCanvas();
      this.renderPanel();
      const head = this.stage.querySelector(`[data-node-head="${CSS.escape(id)}"]`);
      if (head) head.scrollIntoView({ block: "nearest", inline: "nearest" });
    }

    deleteNode(id) {
      const nodes = this.nodes();
      const i = nodes.findIndex((n) => n.id === id);
      if (i < 0) return;
      nodes.splice(i, 1);
      delete this.ed.def.run.layout[id];
      // Wires into others from it go with it; template text keeps its
      // placeholder (Check names it) so no text is lost.
      for (const n of nodes) {
        for (const k of ["from", "if", "then", "else", "prompt", "value"]) if (n[k] === id && n.type !== "const") n[k] = "";
        if (Array.isArray(n.inputs)) n.inputs = n.inputs.filter((r) => r !== id);
        if (n.args && typeof n.args === "object") for (const [k, v] of Object.entries(n.args)) if (v === id) n.args[k] = "";
      }
      if (this.ed.errors) this.ed.errors.nodes.delete(id);
      this.ed.selected = null;
      this.changed();
      this.renderCanvas();
      this.renderPanel();
      this.setStatus(`Deleted node ${id}.`);
    }

    renameNode(n, to) {
      const from = n.id;
      if (from === to) return "";
      if (!ID_RE.test(to)) return "An id starts with a letter or _, then letters, digits or _ (64 at most).";
      if (this.node(to)) return `There is already a node "${to}".`;
      n.id = to;
      const layout = this.ed.def.run.layout;
      if (layout[from]) {
        layout[to] = layout[from];
        delete layout[from];
      }
      for (const o of this.nodes()) {
        for (const k of ["from", "if", "then", "else", "prompt", "value"]) if (o[k] === from && o.type !== "const") o[k] = to;
        if (Array.isArray(o.inputs)) o.inputs = o.inputs.map((r) => (r === from ? to : r));
        if (o.args && typeof o.args === "object") for (const [k, v] of Object.entries(o.args)) if (v === from) o.args[k] = to;
        if (o.type === "template" && typeof o.text === "string") o.text = renamePlaceholder(o.text, from, to);
      }
      if (this.ed.errors && this.ed.errors.nodes.has(from)) {
        this.ed.errors.nodes.set(to, this.ed.errors.nodes.get(from));
        this.ed.errors.nodes.delete(from);
      }
      this.ed.selected = to;
      this.changed();
      return "";
    }

    // connect wires from's value into a slot of to.
    connect(toId, slot, fromId) {
      const n = this.node(toId);
      if (!n || !this.node(fromId) || toId === fromId) return false;
      if (slot === "ph+") n.text = `${n.text || ""}{{${fromId}}}`;
      else if (slot.startsWith("ph:")) {
        const old = slot.slice(3);
        n.text = renamePlaceholder(n.text, old, fromId);
      } else if (slot === "in+") (n.inputs = Array.isArray(n.inputs) ? n.inputs : []).push(fromId);
      else if (slot.startsWith("in:")) n.inputs[Number(slot.slice(3))] = fromId;
      else if (slot.startsWith("arg:")) (n.args = n.args && typeof n.args === "object" ? n.args : {})[slot.slice(4)] = fromId;
      else n[slot] = fromId;
      this.changed();
      return true;
    }

    // ---- pointer: moving nodes and drawing wires ----
    startMove(e, id, box) {
      if (e.button !== 0) return;
      const p = this.pos.get(id);
      const head = e.currentTarget;
      this.drag = { kind: "move", id, box, sx: e.clientX, sy: e.clientY, x: p.x, y: p.y, moved: false };
      head.setPointerCapture(e.pointerId);
      const move = (ev) => {
        const d = this.drag;
        const dx = ev.clientX - d.sx;
        const dy = ev.clientY - d.sy;
        if (!d.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
        d.moved = true;
        d.nx = Math.max(0, Math.round(d.x + dx));
        d.ny = Math.max(0, Math.round(d.y + dy));
        d.box.style.left = `${d.nx}px`;
        d.box.style.top = `${d.ny}px`;
        d.box.classList.add("moving");
        this.drawWires();
      };
      const up = () => {
        const d = this.drag;
        this.drag = null;
        head.removeEventListener("pointermove", move);
        head.removeEventListener("pointerup", up);
        head.removeEventListener("pointercancel", up);
        if (d && d.moved) {
          this.ed.def.run.layout[d.id] = { x: d.nx, y: d.ny };
          this.changed();
          this.renderCanvas();
        }
      };
      head.addEventListener("pointermove", move);
      head.addEventListener("pointerup", up);
      head.addEventListener("pointercancel", up);
    }

    startWire(e, fromId) {
      if (e.button !== 0) return;
      e.preventDefault();
      e.stopPropagation();
      const port = e.currentTarget;
      port.setPointerCapture(e.pointerId);
      this.drag = { kind: "wire", fromId, from: this.portPoint(port), to: null };
      this.stage.classList.add("wiring");
      const s = () => this.stage.getBoundingClientRect();
      const move = (ev) => {
        const r = s();
        this.drag.to = { x: ev.clientX - r.left, y: ev.clientY - r.top };
        this.drawWires();
      };
      const up = (ev) => {
        port.removeEventListener("pointermove", move);
        port.removeEventListener("pointerup", up);
        port.removeEventListener("pointercancel", up);
        this.drag = null;
        this.stage.classList.remove("wiring");
        if (ev.type === "pointerup") this.dropWire(fromId, document.elementFromPoint(ev.clientX, ev.clientY));
        this.drawWires();
      };
      port.addEventListener("pointermove", move);
      port.addEventListener("pointerup", up);
      port.addEventListener("pointercancel", up);
    }

    // dropWire wires fromId into the input under the pointer: a port or its
    // row, or a node (its first empty input).
    dropWire(fromId, target) {
      if (!target) return;
      const slotEl = target.closest(".gslot");
      const nodeEl = target.closest(".gnode");
      if (!nodeEl) return;
      const toId = nodeEl.dataset.node;
      let slot = slotEl ? slotEl.dataset.slot : "";
      if (!slot) {
        const slots = this.slots(this.node(toId));
        const free = slots.find((x) => !x.add && !x.ref) || slots.find((x) => x.add);
        if (!free) {
          this.setStatus(`A ${this.node(toId).type} node takes no input.`);
          return;
        }
        slot = free.key;
      }
      if (this.connect(toId, slot, fromId)) {
        this.ed.selected = toId;
        this.renderCanvas();
        this.renderPanel();
        this.setStatus(`Wired ${fromId} into ${toId}.`);
      }
    }

    onKey(e) {
      const ed = this.ed;
      if (!ed || ed.kind !== "graph" || !ed.editable) return;
      const head = e.target.closest && e.target.closest(".gnode-head");
      if (!head) return;
      const id = head.dataset.nodeHead;
      if (e.key === "Delete" || e.key === "Backspace") {
        e.preventDefault();
        this.deleteNode(id);
        return;
      }
      const step = { ArrowLeft: [-10, 0], ArrowRight: [10, 0], ArrowUp: [0, -10], ArrowDown: [0, 10] }[e.key];
      if (!step) return;
      e.preventDefault();
      const p = this.pos.get(id);
      ed.def.run.layout[id] = { x: Math.max(0, p.x + step[0]), y: Math.max(0, p.y + step[1]) };
      this.changed();
      this.renderCanvas();
      const again = this.stage.querySelector(`[data-node-head="${CSS.escape(id)}"]`);
      if (again) again.focus();
    }

    // ---- the side panel ----
    renderPanel() {
      const ed = this.ed;
      if (!ed || ed.kind !== "graph" || !this.panel) return;
      const panel = this.panel;
      panel.replaceChildren();
      const n = ed.selected && this.node(ed.selected);
      if (!n) {
        panel.append(el("h3", { text: "Settings" }),
          el("p", { class: "muted small-text", text: ed.editable ? "Select a node to see and change its settings. Add nodes with the buttons above; wire them by dragging from a node's right edge to another's input, or here." : "Select a node to see its settings." }));
        return;
      }
      const ro = !ed.editable;
      const errs = (ed.errors && ed.errors.nodes.get(n.id)) || [];
      panel.append(el("div", { class: "panel-head" },
        el("h3", { text: n.type }),
        el("span", { class: "muted small-text", text: TYPE_HELP[n.type] || "" })));
      if (errs.length) {
        panel.append(el("ul", { class: "panel-errors", role: "alert" }, ...errs.map((x) => el("li", { text: x.message }))));
      }
      const form = el("div", { class: "panel-fields" });
      panel.append(form);
      const errFields = new Set(errs.map((x) => x.field).filter((f) => f));
      const wrap = (key, label, input, help) => {
        const id = input.id || `nf-${key}`;
        input.id = id;
        if (!input.dataset.field) input.dataset.field = key;
        const w = el("div", { class: `field${errFields.has(key) ? " invalid" : ""}` }, el("label", { for: id, text: label }), input,
          help ? el("p", { class: "help", text: help }) : null);
        form.append(w);
        return w;
      };

      // id
      const idIn = el("input", { type: "text", value: n.id, spellcheck: "false", autocomplete: "off", disabled: ro });
      const idErr = el("p", { class: "field-error", hidden: true });
      const commitId = () => {
        const problem = this.renameNode(n, idIn.value.trim());
        idErr.hidden = !problem;
        idErr.textContent = problem;
        if (!problem) this.renderCanvas();
      };
      idIn.addEventListener("change", commitId);
      idIn.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); commitId(); } });
      wrap("id", "Id", idIn).append(idErr);

      const update = () => { this.changed(); this.renderCanvas(); };
      const refSelect = (key, value, onPick) => {
        const s = el("select", { disabled: ro, "data-field": key });
        s.append(el("option", { value: "", text: "— not wired —" }));
        for (const o of this.nodes()) if (o.id !== n.id && o.type !== "return") s.append(el("option", { value: o.id, text: `${o.id} (${o.type})` }));
        if (value && !this.node(value)) s.append(el("option", { value, text: `${value} (no such node)` }));
        s.value = value || "";
        s.addEventListener("change", () => { onPick(s.value); update(); });
        return s;
      };
      const textIn = (key, value, area, onText) => {
        const t = area ? el("textarea", { rows: "3", class: "text", disabled: ro }) : el("input", { type: "text", disabled: ro, spellcheck: "false" });
        t.value = value == null ? "" : String(value);
        t.dataset.field = key;
        t.addEventListener("input", () => { onText(t.value); update(); });
        return t;
      };
      const literal = (key, label, value, optional, onValue) => {
        const unset = value === undefined;
        const mode = el("select", { disabled: ro, "data-field": `${key}-mode`, "aria-label": `${label}: written as` });
        if (optional) mode.append(el("option", { value: "none", text: "not set" }));
        mode.append(el("option", { value: "text", text: "text" }), el("option", { value: "json", text: "JSON" }));
        mode.value = unset ? (optional ? "none" : "text") : literalMode(value);
        const t = el("textarea", { rows: "2", disabled: ro || mode.value === "none", spellcheck: "false" });
        t.value = unset ? "" : (typeof value === "string" ? value : JSON.stringify(value));
        const err = el("p", { class: "field-error", hidden: true });
        const apply = () => {
          t.disabled = ro || mode.value === "none";
          err.hidden = true;
          if (mode.value === "none") return onValue(undefined);
          if (mode.value === "text") return onValue(t.value);
          try {
            onValue(JSON.parse(t.value));
          } catch (e) {
            err.hidden = false;
            err.textContent = `This is not valid JSON: ${e.message}`;
            return undefined;
          }
          return undefined;
        };
        mode.addEventListener("change", () => { apply(); update(); });
        t.addEventListener("input", () => { apply(); update(); });
        const w = wrap(key, label, t);
        w.insertBefore(mode, t);
        w.append(err);
      };

      switch (n.type) {
        case "arg": {
          const s = el("select", { disabled: ro });
          s.append(el("option", { value: "", text: "— choose a parameter —" }));
          for (const p of ed.def.params) if (p.name) s.append(el("option", { value: p.name, text: `${p.name} (${p.kind})` }));
          if (n.param && !ed.def.params.some((p) => p.name === n.param)) s.append(el("option", { value: n.param, text: `${n.param} (not a parameter)` }));
          s.value = n.param || "";
          s.addEventListener("change", () => { n.param = s.value; update(); });
          wrap("param", "Parameter", s, "Its value is the argument given for this parameter.");
          break;
        }
        case "const":
          literal("value", "Value", n.value, false, (v) => { n.value = v; });
          break;
        case "template": {
          const t = textIn("text", n.text, true, (v) => { n.text = v; });
          const preview = el("p", { class: "ph-preview", "aria-label": "The text with its placeholders marked" });
          const paint = () => {
            preview.replaceChildren(marked(n.text || "", new Set(this.nodes().map((o) => o.id)), "node"));
          };
          t.addEventListener("input", paint);
          paint();
          const w = wrap("text", "Text", t, "{{id}} puts in the value of node id (JSON if it is not text).");
          w.append(preview);
          if (!ro) {
            const ins = el("select", { "data-field": "insert", "aria-label": "Insert a node's value" });
            ins.append(el("option", { value: "", text: "Insert a node's value…" }));
            for (const o of this.nodes()) if (o.id !== n.id && o.type !== "return") ins.append(el("option", { value: o.id, text: o.id }));
            ins.addEventListener("change", () => {
              if (!ins.value) return;
              const at = t.selectionStart != null && document.activeElement === t ? t.selectionStart : t.value.length;
              t.value = `${t.value.slice(0, at)}{{${ins.value}}}${t.value.slice(at)}`;
              n.text = t.value;
              ins.value = "";
              paint();
              update();
            });
            w.append(ins);
          }
          break;
        }
        case "pick":
          wrap("from", "From", refSelect("from", n.from, (v) => { n.from = v; }));
          wrap("path", "Path", textIn("path", n.path, false, (v) => { n.path = v; }), "A dotted path into the value: items.0.name (numbers index lists).");
          break;
        case "join": {
          const list = Array.isArray(n.inputs) ? n.inputs : (n.inputs = []);
          list.forEach((r, i) => {
            const s = refSelect(`inputs[${i}]`, r, (v) => { list[i] = v; });
            const w = wrap(`inputs[${i}]`, `Input ${i + 1}`, s);
            if (!ro) {
              w.append(el("button", {
                type: "button", class: "ghost small", text: "Remove", "aria-label": `Remove input ${i + 1}`,
                onclick: () => { list.splice(i, 1); update(); this.renderPanel(); },
              }));
            }
          });
          if (!ro) {
            const add = refSelect("inputs+", "", (v) => { if (v) list.push(v); this.renderPanel(); });
            wrap("inputs+", "Add an input", add);
          }
          wrap("separator", "Separator", textIn("separator", n.separator === undefined ? "\n" : n.separator, false, (v) => { n.separator = v; }), "Put between the inputs; empty joins them directly.");
          break;
        }
        case "choose":
          wrap("if", "If", refSelect("if", n.if, (v) => { n.if = v; }));
          literal("equals", "Equals", n.equals, true, (v) => { if (v === undefined) delete n.equals; else n.equals = v; });
          form.lastChild.append(el("p", { class: "help", text: "Not set: the test is whether the value is true (false, null, 0, \"\", [] and {} are not)." }));
          wrap("then", "Then", refSelect("then", n.then, (v) => { n.then = v; }));
          wrap("else", "Else", refSelect("else", n.else, (v) => { n.else = v; }));
          break;
        case "ask_model": {
          wrap("prompt", "Prompt", refSelect("prompt", n.prompt, (v) => { n.prompt = v; }), "The node whose value is the prompt's text.");
          wrap("system", "System", textIn("system", n.system, true, (v) => { n.system = v; }));
          const f = el("select", { disabled: ro }, el("option", { value: "text", text: "text" }), el("option", { value: "json", text: "JSON" }));
          f.value = n.format || "text";
          f.addEventListener("change", () => { n.format = f.value; update(); });
          wrap("format", "Answer", f);
          break;
        }
        case "call_tool": {
          const s = el("select", { disabled: ro });
          s.append(el("option", { value: "", text: "— choose a tool —" }));
          for (const t of this.host.tools() || []) {
            const nm = t.function.name;
            if (nm !== ed.def.name) s.append(el("option", { value: nm, text: nm }));
          }
          if (n.tool && !this.toolSpec(n.tool)) s.append(el("option", { value: n.tool, text: `${n.tool} (not served)` }));
          s.value = n.tool || "";
          s.addEventListener("change", () => {
            n.tool = s.value;
            const spec = this.toolSpec(n.tool);
            const args = {};
            if (spec) for (const k of Object.keys(spec.props)) if (n.args && n.args[k]) args[k] = n.args[k];
            n.args = args;
            update();
            this.renderPanel();
          });
          wrap("tool", "Tool", s);
          const spec = this.toolSpec(n.tool);
          for (const slot of this.slots(n)) {
            const p = slot.key.slice(4);
            const known = spec && spec.props[p];
            const w = wrap(`args.${p}`, `${p}${slot.required ? " (required)" : ""}`, refSelect(`args.${p}`, slot.ref, (v) => {
              n.args = n.args || {};
              if (v) n.args[p] = v;
              else delete n.args[p];
            }), known && known.description ? known.description : (known ? null : "Not a parameter of this tool."));
            w.classList.add("arg-field");
          }
          break;
        }
        case "return":
          wrap("value", "Value", refSelect("value", n.value, (v) => { n.value = v; }), "The node whose value the tool returns.");
          break;
        default:
          form.append(el("p", { class: "muted", text: `This host's UI does not know ${n.type} nodes; their settings are kept as they are.` }));
      }
      if (!ro) {
        panel.append(el("button", { id: "delete-node", class: "danger small", type: "button", text: "Delete node", onclick: () => this.deleteNode(n.id) }));
      }
    }

    // ---- prompt tools ----
    renderPrompt() {
      const ed = this.ed;
      const r = ed.def.run;
      const ro = !ed.editable;
      const box = this.bodyBox;
      box.replaceChildren();
      const area = (key, label, help) => {
        const t = el("textarea", { id: `prompt-${key}`, rows: key === "prompt" ? "6" : "3", class: "text", disabled: ro, spellcheck: "false", "data-meta": `run.${key}` });
        t.value = r[key] || "";
        const preview = el("div", { class: "ph-preview", id: `prompt-${key}-marks`, "aria-label": `${label} with its placeholders marked` });
        t.addEventListener("input", () => {
          r[key] = t.value;
          this.changed();
          this.renderPromptMarks();
        });
        const w = this.fieldWrap(`run.${key}`, el("label", { for: `prompt-${key}`, text: label }), t, help);
        w.insertBefore(preview, w.querySelector(".help") || w.querySelector(".field-error"));
        return w;
      };
      const fmt = el("select", { id: "prompt-format", disabled: ro, "data-meta": "run.format" },
        el("option", { value: "text", text: "text" }), el("option", { value: "json", text: "JSON (the answer is parsed)" }));
      fmt.value = r.format || "text";
      fmt.addEventListener("change", () => { r.format = fmt.value; this.changed(); });
      box.append(
        area("system", "System", "What the model is told before the prompt. {{name}} puts in a parameter."),
        area("prompt", "Prompt", "{{name}} puts in the argument of parameter name."),
        this.fieldWrap("run.format", el("label", { for: "prompt-format", text: "Answer" }), fmt),
        el("ul", { id: "prompt-problems", class: "prompt-problems", "aria-live": "polite" }));
      this.renderPromptMarks();
    }

    // promptProblems: the client-side checks of a prompt tool.
    promptProblems() {
      const d = this.ed.def;
      const known = new Set(d.params.map((p) => p.name));
      const used = new Set([...placeholders(d.run.system), ...placeholders(d.run.prompt)]);
      const out = [];
      for (const u of used) if (!known.has(u)) out.push(`{{${u}}} is not a parameter of this tool: add a parameter "${u}" or fix the name.`);
      for (const key of ["system", "prompt"]) {
        if (parseTemplate(d.run[key]).some((p) => p.unclosed)) out.push(`The ${key} text has a {{ that is never closed with }}.`);
      }
      for (const p of d.params) if (p.required && p.name && !used.has(p.name)) out.push(`The required parameter "${p.name}" is never used: put {{${p.name}}} in the prompt or the system text.`);
      return out;
    }

    renderPromptMarks() {
      const d = this.ed.def;
      const known = new Set(d.params.map((p) => p.name));
      for (const key of ["system", "prompt"]) {
        const m = this.root.querySelector(`#prompt-${key}-marks`);
        if (!m) continue;
        const text = d.run[key] || "";
        m.replaceChildren(text ? marked(text, known, "parameter") : el("span", { class: "muted", text: "(empty)" }));
      }
      const ul = this.root.querySelector("#prompt-problems");
      if (ul) ul.replaceChildren(...this.promptProblems().map((p) => el("li", { text: p })));
    }

    // ---- check and save ----
    body() {
      const d = this.ed.def;
      const run = clone(d.run);
      if (this.ed.kind === "graph") {
        // Keep where each node was seen: auto-placed ones get their place.
        const pos = this.positions();
        run.layout = {};
        for (const n of run.nodes) {
          const p = pos.get(n.id);
          if (p) run.layout[n.id] = { x: Math.round(p.x), y: Math.round(p.y) };
        }
      }
      return {
        name: d.name,
        description: d.description,
        effect: d.effect,
        params: d.params.map((p) => {
          const o = { name: p.name, kind: p.kind, required: p.required };
          if (p.description) o.description = p.description;
          if (p.options && p.options.length) o.options = p.options;
          return o;
        }),
        run,
      };
    }

    // localProblems: what must be right before the host is asked.
    localProblems() {
      const d = this.ed.def;
      const errs = [];
      if (!NAME_RE.test(d.name)) errs.push({ field: "name", message: "A tool's name starts with a lowercase letter, then up to 40 lowercase letters, digits or underscores." });
      else if (this.ed.isNew && (this.host.tools() || []).some((t) => t.function.name === d.name)) errs.push({ field: "name", message: `There is already a tool named "${d.name}": choose another name.` });
      return errs;
    }

    async check() {
      await this.send("POST", "/api/v1/tools/check", "Checking…");
    }

    async save() {
      await this.send("PUT", `/api/v1/tools/${encodeURIComponent(this.ed.def.name)}`, "Saving…");
    }

    async send(method, path, doing) {
      const ed = this.ed;
      const local = this.localProblems();
      const saving = method === "PUT";
      if (local.length) {
        this.showErrors(local, []);
        this.setStatus(`${local.length === 1 ? "One problem" : `${local.length} problems`}: nothing was ${saving ? "saved" : "checked"}.`);
        return;
      }
      const body = this.body();
      const sent = body.run.nodes ? body.run.nodes.map((n) => n.id) : [];
      this.setStatus(doing);
      const buttons = [...this.root.querySelectorAll("#def-check, #def-save")];
      buttons.forEach((b) => (b.disabled = true));
      let resp;
      try {
        resp = await this.host.request(method, path, body);
      } catch (e) {
        this.setStatus(`The host could not be reached: ${e.message}.`);
        return;
      } finally {
        buttons.forEach((b) => (b.disabled = false));
      }
      if (this.ed !== ed) return; // another tool was opened meanwhile
      const b = resp.body || {};
      if ((resp.status === 200 || resp.status === 201) && b.ok !== false) {
        this.showErrors(saving && Array.isArray(b.problems) ? b.problems : [], sent);
        if (saving) {
          ed.dirty = false;
          ed.isNew = false;
          if (b.served === false) {
            this.setStatus(`Saved ${ed.def.name}, but the host does not serve it: see the problems.`);
            this.host.saved(ed.def.name);
            return;
          }
          this.setStatus(`Saved ${ed.def.name}.`);
          this.host.toast(`Saved ${ed.def.name}; the host serves it now.`);
          this.host.saved(ed.def.name);
        } else {
          this.setStatus("Checked: no problems.");
        }
        return;
      }
      if (Array.isArray(b.errors)) {
        this.showErrors(b.errors, sent);
        const n = b.errors.length;
        this.setStatus(`${saving ? "Not saved: " : "Check found "}${n === 1 ? "one problem" : `${n} problems`}${saving ? "." : "."}`);
        return;
      }
      const msg = (b.error && b.error.message) || `the host answered ${resp.status}`;
      this.showErrors([{ message: msg }], sent);
      this.setStatus(saving ? "Not saved." : "Not checked.");
    }

    // showErrors puts each error where it belongs: on the node it names
    // (run.nodes[i] in its field, or node "id" in its message), by the
    // field of the form it names, or at the top.
    showErrors(list, sentIds) {
      const ed = this.ed;
      const errors = { top: [], nodes: new Map(), fields: new Map() };
      const ids = new Set(ed.kind === "graph" ? this.nodes().map((n) => n.id) : []);
      for (const e of list) {
        const message = e.message || e.text || "Something is wrong here.";
        const field = e.field || "";
        let id = "";
        let sub = "";
        let m = /^run\.nodes\[(\d+)\](?:\.(.*))?$/.exec(field);
        if (m && sentIds[Number(m[1])] !== undefined) {
          id = sentIds[Number(m[1])];
          sub = m[2] || "";
        } else if ((m = /^run\.layout\.([A-Za-z_][A-Za-z0-9_]*)/.exec(field))) {
          id = m[1];
        } else if (ed.kind === "graph" && (m = /node "([^"]+)"/.exec(message))) {
          id = m[1];
        }
        if (id && ids.has(id)) {
          if (!errors.nodes.has(id)) errors.nodes.set(id, []);
          errors.nodes.get(id).push({ field: sub.split(/[.[]/)[0], message });
          continue;
        }
        const key = this.formField(field);
        if (key) {
          errors.fields.set(key, errors.fields.has(key) ? `${errors.fields.get(key)} ${message}` : message);
          continue;
        }
        errors.top.push(message);
      }
      ed.errors = errors;
      if (ed.kind === "graph") {
        this.renderCanvas();
        this.renderPanel();
      }
      this.renderErrors();
      // Take the eye to the first one.
      const first = this.root.querySelector(".gnode.has-error, .field.invalid, #def-errors:not([hidden])");
      if (first) first.scrollIntoView({ block: "nearest" });
    }

    formField(field) {
      if (["name", "description", "effect"].includes(field)) return field;
      let m = /^params\[(\d+)\]/.exec(field);
      if (m && Number(m[1]) < this.ed.def.params.length) return `params[${m[1]}]`;
      m = /^run\.(system|prompt|format)$/.exec(field);
      if (m && this.ed.kind === "prompt") return `run.${m[1]}`;
      return "";
    }

    renderErrors() {
      const ed = this.ed;
      const box = this.errorsBox;
      const e = ed.errors || { top: [], nodes: new Map(), fields: new Map() };
      box.replaceChildren();
      const onNodes = [...e.nodes.values()].reduce((a, l) => a + l.length, 0);
      if (e.top.length || onNodes) {
        box.append(el("strong", { text: e.top.length ? "The tool has problems" : "Some nodes have problems" }));
        if (e.top.length) box.append(el("ul", null, ...e.top.map((t) => el("li", { class: "top-error", text: t }))));
        if (onNodes) box.append(el("p", { text: `${onNodes === 1 ? "One problem is" : `${onNodes} problems are`} shown on the node${onNodes === 1 ? "" : "s"} ${[...e.nodes.keys()].join(", ")}.` }));
        box.hidden = false;
      } else {
        box.hidden = true;
      }
      for (const p of this.root.querySelectorAll("[data-error-for]")) {
        const msg = e.fields.get(p.dataset.errorFor) || "";
        p.hidden = !msg;
        p.textContent = msg;
        const wrap = p.closest(".field, .param-row");
        if (wrap) wrap.classList.toggle("invalid", !!msg);
      }
    }
  }

  function curve(a, b) {
    const dx = Math.max(40, Math.abs(b.x - a.x) / 2);
    return `M ${a.x} ${a.y} C ${a.x + dx} ${a.y}, ${b.x - dx} ${b.y}, ${b.x} ${b.y}`;
  }

  window.ToolhostEditor = ToolhostEditor;
  window.ToolhostEditor.placeholders = placeholders;
})();
