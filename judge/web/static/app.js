/* dst-judge web interface: a small progressive layer over server-rendered pages.
 *
 * Every page works without this script (links and forms); with it, runs update live from the
 * server's event stream, filters apply on change, charts show values on focus, tables sort,
 * and the review page labels with one key press. Data from the server is only ever written
 * with textContent or as server-escaped HTML fragments of our own pages; nothing here builds
 * markup from data.
 */
(function () {
  "use strict";

  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const csrf = () => ($('meta[name="csrf-token"]') || {}).content || "";

  function pct(value) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(1) + " %";
  }
  function money(value) {
    if (value === null || value === undefined) return "–";
    const v = Number(value);
    return v < 10 ? "$" + v.toFixed(4) : "$" + v.toFixed(2);
  }
  function seconds(value) {
    if (value === null || value === undefined) return "";
    return value < 90 ? Math.round(value) + " s" : Math.round(value / 60) + " min";
  }

  /* --- filters apply on change ------------------------------------------------------------ */
  function autosubmit() {
    $$("form[data-autosubmit]").forEach((form) => {
      $$("select", form).forEach((select) =>
        select.addEventListener("change", () => form.requestSubmit ? form.requestSubmit() : form.submit()));
    });
  }

  /* --- live runs -------------------------------------------------------------------------- */

  function updateJob(data) {
    $$('[data-job="' + CSS.escape(data.id) + '"]').forEach((root) => {
      const status = $('[data-field="status"]', root);
      if (status) {
        status.textContent = data.status + (data.cancel_requested && data.is_running ? " (cancelling)" : "");
        status.className = "badge status-" + data.status;
      }
      const meaning = $('[data-field="meaning"]', root);
      if (meaning) meaning.textContent = data.exit_meaning || "";
      const p = data.progress || {};
      const bar = $('[data-field="progress"] progress', root);
      if (bar) {
        bar.max = p.total || 1;
        bar.value = p.done || 0;
        bar.textContent = (p.done || 0) + " of " + (p.total || "?");
      }
      const text = $('[data-field="progress"] .progress-text', root);
      if (text) {
        let t = (p.done || 0) + " / " + (p.total === null || p.total === undefined ? "?" : p.total) + (p.total === 1 ? " call" : " calls");
        if (p.errors) t += ", " + p.errors + (p.errors === 1 ? " error" : " errors");
        if (p.cache_hits) t += ", " + p.cache_hits + " cached";
        if (p.eta_seconds && data.is_running) t += ", ~" + seconds(p.eta_seconds) + " left";
        text.textContent = t;
      }
      const h = data.headline || {};
      const set = (field, value) => { const el = $('[data-field="' + field + '"]', root); if (el) el.textContent = value; };
      set("cost", money(p.cost_usd));
      set("tsa", pct(h.tsa));
      set("jga", pct(h.judge_jga));
      const rule = $('[data-field="rule"]', root);
      if (rule) {
        const parts = Object.entries(h.rule_agreement || {}).map(([v, a]) => v + ": " + pct(a));
        rule.textContent = parts.length ? parts.join(" · ") : "–";
      }
      const error = $('[data-field="error"]', root);
      if (error) { error.textContent = data.error || ""; error.hidden = !data.error; }
      if (data.final) {
        $$('[data-field="downloads"]', root).forEach((el) => { el.hidden = !data.has_results; });
        $$("form[data-cancel]", root).forEach((form) => form.remove());
      }
    });
  }

  function live() {
    const ids = new Set();
    $$("[data-watch]").forEach((el) => el.dataset.watch.split(" ").filter(Boolean).forEach((id) => ids.add(id)));
    if (!ids.size || !window.EventSource) return;
    const url = new URL(document.body.dataset.events, location.origin);
    ids.forEach((id) => url.searchParams.append("job", id));
    const note = $("#live-status");
    const source = new EventSource(url.toString());
    const onRunPage = document.body.dataset.page === "run";
    source.addEventListener("job", (event) => {
      const data = JSON.parse(event.data);
      updateJob(data);
      if (note) note.textContent = "Live: " + data.id + " is " + data.status + ".";
      if (onRunPage && data.final) {
        source.close();
        // the turns exist now: show them
        window.setTimeout(() => location.reload(), 300);
      }
    });
    source.addEventListener("done", () => source.close());
    source.onerror = () => { if (note) note.textContent = "Live updates paused (reconnecting)."; };
  }

  /* --- run page: filter values once the index is ready ------------------------------------- */
  function facets(attempt) {
    const form = $("form[data-facets]");
    if (!form) return;
    fetch(form.dataset.facets, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => {
        // 202: the run's index is being built in the background; ask again shortly
        if (r.status === 202 && (attempt || 0) < 60) {
          window.setTimeout(() => facets((attempt || 0) + 1), 2000);
          return null;
        }
        return r.ok && r.status === 200 ? r.json() : null;
      })
      .then((data) => {
        if (!data) return;
        const fill = (id, values) => {
          const list = document.getElementById(id);
          if (!list || list.children.length) return;
          values.forEach((v) => { const o = document.createElement("option"); o.value = v; list.appendChild(o); });
        };
        fill("domains", data.domains || []);
        fill("slots", data.slots || []);
        const kinds = $('select[name="kind"]', form);
        if (kinds) {
          const have = new Set($$("option", kinds).map((o) => o.value));
          (data.kinds || []).forEach((k) => {
            if (have.has(k)) return;
            const o = document.createElement("option");
            o.value = k; o.textContent = k;
            kinds.appendChild(o);
          });
        }
      })
      .catch(() => {});
  }

  /* --- charts and sortable tables ---------------------------------------------------------- */
  function charts() {
    $$("figure.chart").forEach((figure) => {
      const tip = $(".tip", figure);
      $$("rect.bar", figure).forEach((bar) => {
        const show = () => { if (tip) tip.textContent = bar.dataset.tip; };
        bar.addEventListener("mouseenter", show);
        bar.addEventListener("focus", show);
      });
      $$("a.bar-link", figure).forEach((link) => link.addEventListener("focus", () => {
        if (tip) tip.textContent = link.getAttribute("aria-label");
      }));
    });
    const switcher = $(".measure-switch");
    if (switcher) {
      switcher.hidden = false;
      const apply = () => {
        const chosen = ($('input[name="measure"]:checked', switcher) || {}).value;
        $$(".measure").forEach((el) => { el.hidden = el.dataset.measure !== chosen; });
      };
      $$('input[name="measure"]', switcher).forEach((input) => input.addEventListener("change", apply));
      apply();
    }
  }

  function sortable() {
    $$("table.sortable").forEach((table) => {
      const rows = $$("thead tr", table);
      const last = rows[rows.length - 1];
      const offset = rows.length > 1 ? 1 : 0;
      $$("th", last).forEach((th, i) => {
        const column = i + offset;
        th.tabIndex = 0;
        th.setAttribute("aria-sort", "none");
        const sort = () => {
          const body = table.tBodies[0];
          const dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
          $$("th", last).forEach((o) => o.setAttribute("aria-sort", "none"));
          th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
          const key = (row) => {
            const cell = row.children[column];
            if (!cell) return "";
            const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
            const n = Number(raw);
            return raw !== "" && !Number.isNaN(n) ? n : raw.toLowerCase();
          };
          Array.from(body.rows)
            .sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * dir; })
            .forEach((row) => body.appendChild(row));
        };
        th.addEventListener("click", sort);
        th.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
      });
    });
  }

  /* --- review: one key press labels and advances ------------------------------------------- */
  function review() {
    const root = $("#review-item");
    if (!root) return;
    const state = { slot: null, cache: new Map(), busy: false, saves: [] };
    window.dstReview = state;
    const item = () => $(".review-item", root);
    const position = () => Number((item() || { dataset: { pos: 0 } }).dataset.pos);
    const size = () => Number((item() || { dataset: { size: 0 } }).dataset.size);
    const status = (text, bad) => {
      const el = $(".save-status", root);
      if (el) { el.textContent = text; el.classList.toggle("error", !!bad); }
    };
    // a dialogue shown in a scrolling window (narrow layouts) opens at the turn under review
    const toCurrentTurn = () => { const d = $(".dialogue", root); if (d) d.scrollTop = d.scrollHeight; };
    toCurrentTurn();
    const itemUrl = (pos) => { const u = new URL(root.dataset.itemUrl, location.origin); u.searchParams.set("pos", pos); return u.toString(); };
    const prefetch = (pos) => {
      if (pos < 0 || pos >= size() || state.cache.has(pos)) return;
      state.cache.set(pos, fetch(itemUrl(pos), { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then((r) => (r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)))));
    };
    const show = async (pos) => {
      if (pos < 0 || pos >= size()) return;
      prefetch(pos);
      const pending = state.cache.get(pos);
      state.cache.delete(pos);
      let html;
      try { html = await pending; } catch (err) { status("Could not load the next turn: " + err.message, true); return; }
      root.innerHTML = html;
      toCurrentTurn();
      state.slot = null;
      const url = new URL(root.dataset.pageUrl, location.origin);
      url.searchParams.set("pos", pos);
      history.replaceState(null, "", url.toString());
      const heading = $("#item-h", root);
      if (heading) heading.focus({ preventScroll: false });
      prefetch(pos + 1);
    };
    let agreementTimer = null, polls = 0;
    const refreshAgreement = (delay) => {
      window.clearTimeout(agreementTimer);
      agreementTimer = window.setTimeout(() => {
        fetch(root.dataset.agreementUrl, { credentials: "same-origin", headers: { Accept: "text/html" } })
          .then((r) => (r.ok ? r.text() : null))
          .then((html) => {
            if (html === null) return;
            const box = $("#agreement");
            box.innerHTML = html;
            const panel = $(".agreement", box);
            if (panel && panel.dataset.updating === "true" && polls < 30) { polls += 1; refreshAgreement(600); } else { polls = 0; }
          }).catch(() => {});
      }, delay);
    };
    // the panel's counts change with the save itself; its statistics follow in the background
    const showCounts = (counts) => {
      Object.entries(counts).forEach(([field, value]) => {
        $$('#agreement [data-count="' + CSS.escape(field) + '"]').forEach((el) => {
          const number = $("strong", el), unit = $(".unit", el);
          if (number) number.textContent = Number(value).toLocaleString("en");
          if (unit) unit.textContent = value === 1 ? el.dataset.one : el.dataset.many;
        });
      });
    };
    const save = async (label, slot) => {
      const current = item();
      if (!current || state.busy) return false;
      state.busy = true;
      const note = slot ? null : (($("#note", root) || {}).value || "").trim() || null;
      const body = { dialogue_id: current.dataset.dialogue, turn_index: Number(current.dataset.turn), slot: slot || "", label: label, note: note, blind: current.dataset.blind === "true" };
      const started = performance.now();
      let response;
      try {
        response = await fetch(root.dataset.saveUrl, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf() },
          body: JSON.stringify(body),
        });
      } catch (err) {
        state.busy = false;
        status("Not saved: " + err.message, true);
        return false;
      }
      const took = performance.now() - started;
      state.busy = false;
      if (!response.ok) {
        let message = "HTTP " + response.status;
        try { message = (await response.json()).error.message; } catch (err) { /* keep the status */ }
        status("Not saved: " + message, true);
        return false;
      }
      state.saves.push(took);
      state.lastSaveMs = took;
      try { showCounts((await response.json()).counts || {}); } catch (err) { /* the panel refresh follows */ }
      const group = slot ? $$('button[data-slot="' + CSS.escape(slot) + '"]', current) : $$(".label-bar button[data-label]", current);
      group.forEach((b) => b.setAttribute("aria-pressed", b.dataset.label === label ? "true" : "false"));
      status("Saved " + label + (slot ? " for " + slot : "") + " (" + Math.round(took) + " ms)");
      // recomputed once the reviewer pauses, not on every key press of a quick run
      refreshAgreement(1200);
      return true;
    };
    const labelTurn = async (label) => {
      const pos = position();
      const current = item();
      const name = current ? current.dataset.dialogue + " turn " + current.dataset.turn : "";
      if (await save(label, null)) {
        if (pos + 1 < size()) {
          await show(pos + 1);
          status("Saved " + label + " for " + name + " (" + Math.round(state.lastSaveMs) + " ms).");
        } else {
          status("Saved " + label + ". That was the last turn of this queue.");
        }
      }
    };
    const selectSlot = (n) => {
      const row = $('tr[data-slot-index="' + n + '"]', root);
      $$("tr.selected", root).forEach((r) => r.classList.remove("selected"));
      if (!row) { state.slot = null; return; }
      row.classList.add("selected");
      state.slot = row.dataset.slot;
      status("Slot " + state.slot + ": c, x or u labels it; Esc returns to the turn.");
    };
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const typing = e.target.closest && e.target.closest("input, textarea, select");
      if (typing) {
        if (e.key === "Escape") { e.target.blur(); e.preventDefault(); }
        return;
      }
      const key = e.key.toLowerCase();
      if (key === "c" || key === "x" || key === "u") {
        e.preventDefault();
        const label = { c: "correct", x: "incorrect", u: "unsure" }[key];
        if (state.slot) save(label, state.slot); else labelTurn(label);
      } else if (/^[1-9]$/.test(key)) {
        e.preventDefault();
        selectSlot(key);
      } else if (key === "escape") {
        selectSlot(0);
        status("");
      } else if (key === "n") {
        const note = $("#note", root);
        if (note) { e.preventDefault(); note.focus(); }
      } else if (key === "j" || key === "arrowright") {
        e.preventDefault(); show(position() + 1);
      } else if (key === "k" || key === "arrowleft") {
        e.preventDefault(); show(position() - 1);
      }
    });
    root.addEventListener("click", (e) => {
      const button = e.target.closest("button[data-label]");
      if (button) {
        e.preventDefault();
        if (button.dataset.slot) save(button.dataset.label, button.dataset.slot);
        else labelTurn(button.dataset.label);
        return;
      }
      const nav = e.target.closest("a[data-nav]");
      if (nav) {
        e.preventDefault();
        show(position() + (nav.dataset.nav === "next" ? 1 : -1));
      }
    });
    prefetch(position() + 1);
    const panel = $("#agreement .agreement");
    if (panel && panel.dataset.updating === "true") refreshAgreement(600);
  }

  /* --- the candidates queue: a key per decision ------------------------------------------ */
  function corrections() {
    if (document.body.dataset.page !== "corrections") return;
    const form = $("#decide");
    const value = $("#value");
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const typing = e.target.closest && e.target.closest("input, textarea, select");
      if (typing) {
        if (e.key === "Escape") e.target.blur();
        if (e.key === "Enter" && e.target === value && form) {
          e.preventDefault();
          form.requestSubmit($("#edit"));
        }
        return;
      }
      const press = (sel) => { const el = $(sel); if (el) { e.preventDefault(); el.click(); } };
      if (e.key === "a" && form) { e.preventDefault(); form.requestSubmit($("#accept")); }
      else if (e.key === "r" && form) { e.preventDefault(); form.requestSubmit($("#reject")); }
      else if (e.key === "e" && value) { e.preventDefault(); value.focus(); value.select(); }
      else if (e.key === "j") press("#next");
      else if (e.key === "k") press("#prev");
    });
  }

  function errorSummary() {
    const summary = $("#error-summary");
    if (summary) summary.focus();
  }

  document.addEventListener("DOMContentLoaded", () => {
    autosubmit();
    live();
    facets(0);
    charts();
    sortable();
    review();
    corrections();
    errorSummary();
  });
})();
