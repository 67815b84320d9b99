// toolhost web UI: the pending approvals panel. Calls of tools with effect
// "change" wait for a person; this panel lists those the signed-in caller
// may decide (GET /api/v1/approvals), each with the tool, why it asks and
// its exact arguments as JSON, and approves or declines one (POST
// /api/v1/approvals/{id}). Every value is shown as text, never as markup.
"use strict";

(() => {
  const POLL_MS = 3000;

  class ToolhostApprovals {
    // opts: root (the panel's element), request(method, path, body) →
    // {status, body}, toast(text).
    constructor(opts) {
      this.root = opts.root;
      this.request = opts.request;
      this.toast = opts.toast || (() => {});
      this.timer = null;
      this.busy = new Set();
      this.shown = "";
    }

    // signedIn starts the panel for a caller. A viewer decides nothing
    // unless its token has approver = true: the host answers 403 to the
    // others' first read, and refresh stops there.
    signedIn(principal) {
      this.stop();
      this.root.hidden = true;
      if (!principal) return;
      this.refresh();
      this.timer = setInterval(() => this.refresh(), POLL_MS);
    }

    stop() {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
    }

    // refresh reads the approvals waiting and shows them.
    async refresh() {
      let r;
      try {
        r = await this.request("GET", "/api/v1/approvals");
      } catch {
        return; // the host is away: the next poll tries again
      }
      if (r.status === 401 || r.status === 403) {
        this.stop();
        this.root.hidden = true;
        return;
      }
      if (r.status !== 200 || !r.body) return;
      this.show(r.body.approvals || []);
    }

    show(list) {
      const key = JSON.stringify(list.map((a) => a.id));
      if (key === this.shown && list.length) return; // nothing new: keep what the person looks at
      this.shown = key;
      this.root.replaceChildren();
      this.root.hidden = list.length === 0;
      if (!list.length) return;
      const head = document.createElement("div");
      head.className = "approvals-head";
      const h = document.createElement("h2");
      h.textContent = list.length === 1 ? "1 call waits for your approval" : `${list.length} calls wait for your approval`;
      head.append(h);
      this.root.append(head);
      const ul = document.createElement("ul");
      ul.className = "approvals-list";
      for (const a of list) ul.append(this.item(a));
      this.root.append(ul);
    }

    item(a) {
      const li = document.createElement("li");
      li.className = "approval";
      li.dataset.approval = a.id;
      li.dataset.run = a.run;
      const title = document.createElement("div");
      title.className = "approval-title";
      const tool = document.createElement("strong");
      tool.className = "approval-tool";
      tool.textContent = a.tool;
      const who = document.createElement("span");
      who.className = "muted small-text";
      who.textContent = ` asked by ${a.principal}${a.session ? ` in conversation ${a.session}` : ""} · run ${a.run}`;
      title.append(tool, who);
      const why = document.createElement("p");
      why.className = "approval-why muted";
      why.textContent = a.why;
      const args = document.createElement("pre");
      args.className = "approval-args output";
      args.textContent = pretty(a.args);
      const expires = document.createElement("p");
      expires.className = "muted small-text";
      expires.textContent = a.expires ? `Expires at ${new Date(a.expires).toLocaleTimeString()} if nobody decides.` : "";
      const actions = document.createElement("div");
      actions.className = "actions";
      const approve = document.createElement("button");
      approve.type = "button";
      approve.className = "primary approval-approve";
      approve.textContent = "Approve";
      const decline = document.createElement("button");
      decline.type = "button";
      decline.className = "danger approval-decline";
      decline.textContent = "Decline";
      approve.addEventListener("click", () => this.decide(a, "approve", li));
      decline.addEventListener("click", () => this.decide(a, "decline", li));
      actions.append(approve, decline);
      li.append(title, why, args, expires, actions);
      return li;
    }

    async decide(a, decision, li) {
      if (this.busy.has(a.id)) return;
      this.busy.add(a.id);
      for (const b of li.querySelectorAll("button")) b.disabled = true;
      let r;
      try {
        r = await this.request("POST", `/api/v1/approvals/${encodeURIComponent(a.id)}`, { decision });
      } catch (e) {
        r = { status: 0, body: { error: { message: `the host can't be reached: ${e.message}` } } };
      }
      this.busy.delete(a.id);
      if (r.status === 200) {
        this.toast(decision === "approve" ? `Approved: ${a.tool} runs now.` : `Declined: ${a.tool} will not run.`);
      } else {
        const msg = (r.body && r.body.error && r.body.error.message) || `the host answered ${r.status}`;
        this.toast(`Could not ${decision} the call of ${a.tool}: ${msg}`);
      }
      this.shown = "";
      this.refresh();
    }
  }

  // pretty shows arguments as indented JSON.
  function pretty(v) {
    try {
      return JSON.stringify(v === undefined ? null : v, null, 2);
    } catch {
      return String(v);
    }
  }

  window.ToolhostApprovals = ToolhostApprovals;
})();
