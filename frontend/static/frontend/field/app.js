// Fieldcraft field app: today's tasks and one protocol step at a time, for a tablet in one
// hand. Every action is a record written to the outbox first (see sync.js); the screen is
// drawn from IndexedDB, so it looks the same online, offline and after a reload.
(function () {
  "use strict";

  const body = document.body;
  const config = {
    user: body.dataset.user,
    sw: body.dataset.sw,
    scope: body.dataset.scope,
    tasks: body.dataset.apiTasks,
    records: body.dataset.apiRecords,
    photos: body.dataset.apiPhotos,
    login: body.dataset.login,
    taskRecordings: body.dataset.apiTaskRecordings,
    recordingUploads: body.dataset.apiRecordingUploads,
    uploadChunk: Number(body.dataset.uploadChunk) || 0,
  };
  const MOVES = {
    start: [["published"], "in_progress"],
    blocked: [["published", "in_progress"], "blocked"],
    unblocked: [["blocked"], "in_progress"],
    finish: [["published", "in_progress"], "done"],
  };
  const STATUS_LABELS = {
    planned: "Planned", published: "Published", in_progress: "In progress",
    done: "Done", blocked: "Blocked", cancelled: "Cancelled",
  };
  const STALE_LABELS = {
    changed: "stored; the manager had changed the task",
    cancelled: "stored; the task was cancelled",
    reassigned: "stored; the task is with another team",
    target_removed: "stored; the target was taken off the task",
  };
  const KIND_LABELS = {
    step_done: "Step done", capture: "Episode", note: "Note", photo: "Photo",
    start: "Started", finish: "Finished", blocked: "Blocked", unblocked: "Blocker cleared",
  };

  const VERDICTS = {
    received: "⏳ Received, waiting for validation", validating: "⏳ Validating…",
    passed: "✓ Passed", failed: "✕ Failed", unreadable: "✕ Unreadable",
  };
  const WAITING = {
    offline: "Offline: waits for the connection", retry: "Connection lost: resuming",
    signin: "Signed out: sign in again to go on",
  };
  // A recording attached this soon after a capture belongs to that episode.
  const EPISODE_LINK_MS = 15 * 60 * 1000;

  let store = null;
  let sync = null;
  let uploads = null;
  // recordings: each task's recordings as the server last listed them (kept in meta too).
  const state = { tasks: [], outbox: [], sent: [], conflicts: [], meta: {}, takes: {}, recordings: {}, panel: null, drafts: {}, loaded: false };
  const thumbs = {};

  // ---- tiny DOM helper (textContent only: nothing from the server becomes markup) ----
  function h(tag, attrs) {
    const el = document.createElement(tag);
    const a = attrs || {};
    Object.keys(a).forEach(function (k) {
      const v = a[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") el.textContent = v;
      else if (k === "class") el.className = v;
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    });
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }

  // ---- dates ----
  function localToday() { return new Date().toLocaleDateString("en-CA"); }
  function fmtDay(ymd) {
    if (!ymd) return "Unscheduled";
    return new Date(ymd + "T12:00:00").toLocaleDateString(undefined, { weekday: "long", day: "numeric", month: "long" });
  }
  function fmtTime(iso, tz) {
    if (!iso) return "";
    try {
      return new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hour12: false, timeZone: tz || undefined }).format(new Date(iso));
    } catch (e) { return iso.slice(11, 16); }
  }
  // The server words a visit's times on the site's clock, zone included ("08:30–12:00 CET"),
  // the same as the run sheet and the round page; older cached tasks lack it.
  function visitTimes(task) {
    if (!task.start_at) return "";
    return task.local_window || (fmtTime(task.start_at, task.site.timezone) + "–" + fmtTime(task.end_at, task.site.timezone) + " site time");
  }
  function fmtClock(iso) {
    return iso ? new Date(iso).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false }) : "";
  }
  function fmtDuration(ms) {
    const s = Math.max(0, ms) / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const whole = Math.floor(s);
    return Math.floor(whole / 60) + ":" + String(whole % 60).padStart(2, "0") + " min";
  }
  function fmtBytes(n) {
    if (n < 1000) return n + " B";
    const units = ["kB", "MB", "GB", "TB"];
    let v = n / 1000;
    let i = 0;
    while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
    return v.toFixed(v < 10 ? 2 : 1) + " " + units[i];
  }

  // ---- derived state ----
  function taskById(id) { return state.tasks.find(function (t) { return t.id === id; }); }
  function snapshotTime() { return Date.parse(state.meta.server_time || "") || 0; }
  // Records the last task snapshot does not include yet: unsent, or confirmed after it.
  function newerThanSnapshot(taskId) {
    const since = snapshotTime();
    return state.outbox.filter(function (r) { return r.task === taskId; }).concat(
      state.sent.filter(function (r) { return r.task === taskId && (Date.parse(r.received_at || "") || 0) > since; }));
  }
  function allRecords(taskId) {
    return state.outbox.filter(function (r) { return r.task === taskId; }).map(function (r) { return Object.assign({ state: "pending" }, r); })
      .concat(state.sent.filter(function (r) { return r.task === taskId; }).map(function (r) { return Object.assign({ state: "sent" }, r); }))
      .concat(state.conflicts.filter(function (r) { return r.task === taskId; }).map(function (r) { return Object.assign({ state: "refused" }, r); }))
      .sort(function (a, b) { return a.client_created_at < b.client_created_at ? -1 : 1; });
  }
  function counts(task, targetId) {
    const server = targetId ? ((task.targets || []).find(function (t) { return t.id === targetId; }) || {}).captured : task.captured_untargeted;
    const c = { success: (server || {}).success || 0, failure: (server || {}).failure || 0 };
    newerThanSnapshot(task.id).forEach(function (r) {
      if (r.kind !== "capture" || r.payload.calibration || (r.payload.target || null) !== (targetId || null)) return;
      if (r.payload.outcome === "failure") c.failure += 1; else c.success += 1;
    });
    return c;
  }
  function localStatus(task) {
    let status = task.status;
    newerThanSnapshot(task.id).filter(function (r) { return MOVES[r.kind]; })
      .sort(function (a, b) { return a.client_created_at < b.client_created_at ? -1 : 1; })
      .forEach(function (r) { if (MOVES[r.kind][0].indexOf(status) >= 0) status = MOVES[r.kind][1]; });
    return status;
  }
  function stepDone(task, step) {
    return step.done || allRecords(task.id).some(function (r) { return r.kind === "step_done" && r.state !== "refused" && r.payload.step === step.id; });
  }
  function firstOpenStep(task) {
    const steps = task.steps || [];
    for (let i = 0; i < steps.length; i++) if (!stepDone(task, steps[i])) return i;
    return Math.max(0, steps.length - 1);
  }
  function taskTimes(task) {
    let started = task.started_at;
    let finished = task.finished_at;
    allRecords(task.id).forEach(function (r) {
      if (r.state === "refused") return;
      if (r.kind === "start" && (!started || r.client_created_at < started)) started = r.client_created_at;
      if (r.kind === "finish" && (!finished || r.client_created_at > finished)) finished = r.client_created_at;
    });
    return { started: started, finished: finished };
  }
  function plannedTotal(task) { return (task.targets || []).reduce(function (n, t) { return n + t.episodes_planned; }, 0); }
  function capturedTotal(task) {
    let n = 0;
    (task.targets || []).forEach(function (t) { const c = counts(task, t.id); n += c.success + c.failure; });
    const u = counts(task, null);
    return n + u.success + u.failure;
  }

  // ---- routing ----
  function route() {
    const m = location.hash.match(/^#\/task\/(\d+)(?:\/step\/(\d+))?/);
    if (!m) return { view: "list" };
    return { view: "task", id: Number(m[1]), step: m[2] === undefined ? null : Number(m[2]) };
  }
  function go(hash) { if (location.hash !== hash) location.hash = hash; else render(); }

  // ---- actions: every one is a record in the outbox ----
  function record(task, kind, payload, extra) {
    const r = Object.assign({
      uuid: window.FieldStore.uuid4(), kind: kind, task: task.id, payload: payload || {},
      client_created_at: new Date().toISOString(), task_version_seen: task.version,
      task_seen: task.seen || "",  // the server's proof that the task was with our team
    }, extra || {});
    if (navigator.vibrate) navigator.vibrate(25);
    return sync.enqueue(r);
  }
  // at: when the capture was tapped (the failure sheet asks the mode afterwards).
  function capture(task, targetId, outcome, failureMode, at) {
    const payload = { target: targetId || null, outcome: outcome, failure_mode: failureMode || null, calibration: false };
    const key = takeKey(task.id, targetId);
    const take = state.takes[key];
    if (take) {
      // The capture ends the take; without a started take the payload is as it always was.
      payload.take_started_at = take.started_at;
      delete state.takes[key];
      store.remove("takes", key);
    }
    return record(task, "capture", payload, at ? { client_created_at: at } : null);
  }

  // ---- takes: "Start take" marks when the episode began, the capture tap when it ended ----
  function takeKey(taskId, targetId) { return taskId + ":" + (targetId || "none"); }
  function startTake(task, targetId) {
    const row = { key: takeKey(task.id, targetId), task: task.id, target: targetId || null, started_at: new Date().toISOString() };
    state.takes[row.key] = row;
    if (navigator.vibrate) navigator.vibrate(25);
    render();
    return store.put("takes", row);
  }
  function discardTake(task, targetId) {
    const key = takeKey(task.id, targetId);
    delete state.takes[key];
    render();
    return store.remove("takes", key);
  }
  // How long the latest capture's take ran, when that capture had one.
  function lastTakeMs(task, targetId) {
    const captures = allRecords(task.id).filter(function (r) {
      return r.kind === "capture" && !r.payload.calibration && r.state !== "refused" && (r.payload.target || null) === (targetId || null);
    });
    const last = captures[captures.length - 1];
    if (!last || !last.payload.take_started_at) return null;
    return Date.parse(last.client_created_at) - Date.parse(last.payload.take_started_at);
  }
  function tickTakes() {
    document.querySelectorAll("[data-take-started]").forEach(function (el) {
      el.textContent = "Take running · " + fmtDuration(Date.now() - Date.parse(el.dataset.takeStarted));
    });
  }

  function shrink(file) {
    // Photos from tablet cameras run to megabytes; 1600 px JPEG is plenty to show a setup.
    if (!window.createImageBitmap || !file.type || file.type.indexOf("image/") !== 0) return Promise.resolve(file);
    return createImageBitmap(file).then(function (img) {
      const scale = Math.min(1, 1600 / Math.max(img.width, img.height));
      if (scale === 1 && file.size < 1500000) return file;
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(img.width * scale);
      canvas.height = Math.round(img.height * scale);
      canvas.getContext("2d").drawImage(img, 0, 0, canvas.width, canvas.height);
      return new Promise(function (resolve) {
        canvas.toBlob(function (blob) { resolve(blob || file); }, "image/jpeg", 0.85);
      });
    }).catch(function () { return file; });
  }

  // ---- views ----
  function statusBadge(status) {
    return h("span", { class: "badge status-" + status, text: STATUS_LABELS[status] || status });
  }

  function taskCard(task) {
    const status = localStatus(task);
    const pending = state.outbox.filter(function (r) { return r.task === task.id; }).length;
    const sending = uploads ? uploads.items.filter(function (i) { return i.task === task.id && ["hashing", "queued", "sending"].indexOf(i.state) >= 0; }).length : 0;
    const planned = plannedTotal(task);
    return h("li", null, h("a", { class: "task-card", href: "#/task/" + task.id, "data-task": task.id },
      h("span", { class: "task-when" }, fmtDay(task.scheduled_date),
        task.start_at ? " · " + visitTimes(task) : ""),
      h("strong", { class: "task-site", text: task.site.name }),
      h("span", { class: "muted", text: task.site.address || "No address on file" }),
      h("span", { class: "muted", text: "Access: " + task.site.access_window }),
      h("span", { class: "task-tags" }, statusBadge(status),
        planned ? h("span", { class: "badge", text: capturedTotal(task) + " / " + planned + " episodes" }) : null,
        pending ? h("span", { class: "badge warn", text: pending + " waiting to sync" }) : null,
        sending ? h("span", { class: "badge warn", text: sending + (sending === 1 ? " recording" : " recordings") + " uploading" }) : null,
        (task.changes || []).length ? h("span", { class: "badge bad", text: task.removed ? "No longer yours" : "Changed by manager" }) : null)));
  }

  function listView() {
    const today = localToday();
    const tasks = state.tasks.slice().sort(function (a, b) {
      return (a.scheduled_date || "") + (a.start_at || "") < (b.scheduled_date || "") + (b.start_at || "") ? -1 : 1;
    });
    const current = tasks.filter(function (t) { return !t.removed; });
    const todays = current.filter(function (t) { return t.scheduled_date === today; });
    const coming = current.filter(function (t) { return t.scheduled_date > today; });
    const earlier = tasks.filter(function (t) { return t.removed || !t.scheduled_date || t.scheduled_date < today; });
    function section(title, list, empty) {
      return [h("h2", { text: title }), list.length ? h("ul", { class: "task-list" }, list.map(taskCard)) : h("p", { class: "muted", text: empty })];
    }
    const never = !state.meta.fetched_at;
    return h("div", null,
      h("h1", { text: "Today, " + fmtDay(today) }),
      never ? h("p", { class: "muted", text: sync && sync.online() ? "Loading your tasks…" : "Connect once to load your tasks; after that the app works offline." }) : null,
      section("Today's tasks", todays, "No tasks today."),
      section("Coming days", coming, "Nothing scheduled for the coming days."),
      earlier.length ? section("Earlier and removed", earlier, "") : null);
  }

  function banners(task) {
    const out = [];
    const status = localStatus(task);
    if (task.removed) {
      out.push(h("div", { class: "banner bad" }, h("strong", { text: "This task is no longer on your team's list." }),
        " It was reassigned, moved or cancelled. Records you made for it are kept and will sync; the manager sees them flagged."));
    } else if (status === "cancelled") {
      out.push(h("div", { class: "banner bad" }, h("strong", { text: "The manager cancelled this task." }),
        " Anything you record is still kept and synced, flagged for the manager."));
    }
    const changes = task.changes || [];
    if (changes.length) {
      out.push(h("div", { class: "banner warn", role: "alert" },
        h("strong", { text: "The manager changed this task:" }),
        h("ul", null, changes.map(function (c) { return c.items.map(function (i) { return h("li", { text: i }); }); })),
        h("button", { class: "tap", type: "button", onclick: function () { acknowledge(task); }, text: "Got it" })));
    }
    const older = state.outbox.filter(function (r) { return r.task === task.id && r.task_version_seen < task.version; }).length;
    if (older) {
      out.push(h("div", { class: "banner" }, older + (older === 1 ? " record" : " records") +
        " waiting to sync were made before the manager's change. They will still be stored, flagged for the manager."));
    }
    const stale = state.sent.filter(function (r) { return r.task === task.id && r.stale_reason; }).length;
    if (stale) out.push(h("div", { class: "banner" }, stale + " of your synced records here were flagged for the manager (made against an older version of the task)."));
    return out;
  }

  function acknowledge(task) {
    const copy = Object.assign({}, task, { changes: [] });
    store.put("tasks", copy).then(reload);
  }

  function statusActions(task) {
    const status = localStatus(task);
    const times = taskTimes(task);
    const tz = task.site.timezone;
    const buttons = [];
    if (status === "published") buttons.push(h("button", { class: "tap primary", type: "button", "data-action": "start", text: "Start task", onclick: function () { record(task, "start"); } }));
    if (status === "published" || status === "in_progress") {
      buttons.push(h("button", { class: "tap danger-outline", type: "button", "data-action": "blocked", text: "Report blocker", onclick: function () { state.panel = { kind: "blocked", task: task.id }; render(); } }));
      buttons.push(h("button", { class: "tap", type: "button", "data-action": "finish", text: "Finish task", onclick: function () { state.panel = { kind: "finish", task: task.id }; render(); } }));
    }
    if (status === "blocked") buttons.push(h("button", { class: "tap primary", type: "button", "data-action": "unblocked", text: "Blocker cleared", onclick: function () { record(task, "unblocked"); } }));
    return h("div", { class: "task-actions" },
      h("div", { class: "button-row" }, buttons),
      h("p", { class: "muted" },
        times.started ? "Started " + fmtTime(times.started, tz) : "Not started",
        times.finished ? " · finished " + fmtTime(times.finished, tz) : "",
        status === "blocked" && task.blocked_reason ? " · blocked: " + task.blocked_reason : ""));
  }

  function counter(task, target) {
    const targetId = target ? target.id : null;
    const c = counts(task, targetId);
    const planned = target ? target.episodes_planned : 0;
    const done = c.success + c.failure;
    const take = state.takes[takeKey(task.id, targetId)];
    const lastTake = take ? null : lastTakeMs(task, targetId);
    return h("div", { class: "counter", "data-target": targetId === null ? "none" : targetId },
      h("div", { class: "counter-head" },
        h("strong", { text: target ? target.label : "Episodes" }),
        target && target.failure_mode ? h("span", { class: "muted", text: " · provoke: " + target.failure_mode }) : null),
      h("div", { class: "counter-nums" },
        h("span", { class: "counter-total", text: planned ? done + " / " + planned : String(done) }),
        h("span", { class: "muted", text: c.success + " success · " + c.failure + " failure" })),
      planned ? h("div", { class: "meter" }, h("span", { style: "width:" + Math.min(100, Math.round(100 * done / planned)) + "%" })) : null,
      h("div", { class: "button-row" },
        h("button", { class: "tap big" + (take ? " take-on" : ""), type: "button", "data-action": "start-take", text: take ? "Restart take" : "Start take",
          onclick: function () { startTake(task, targetId); } }),
        h("button", { class: "tap big ok", type: "button", "data-action": "success", text: "+1 success", onclick: function () { capture(task, targetId, "success"); } }),
        h("button", { class: "tap big bad", type: "button", "data-action": "failure", text: "+1 failure",
          onclick: function () { state.panel = { kind: "failure", task: task.id, target: targetId, at: new Date().toISOString() }; render(); } })),
      take
        ? h("div", { class: "take" },
          h("span", { class: "take-timer", "data-take-started": take.started_at, text: "Take running · " + fmtDuration(Date.now() - Date.parse(take.started_at)) }),
          h("button", { class: "tap", type: "button", "data-action": "discard-take", text: "Discard take", onclick: function () { discardTake(task, targetId); } }))
        : lastTake === null ? null : h("div", { class: "take" }, h("span", { class: "take-last muted", text: "Last take " + fmtDuration(lastTake) })));
  }

  function calibrationWidget(task) {
    const server = task.calibration || [];
    const known = {};
    server.forEach(function (c) { known[c.uuid] = true; });
    const local = allRecords(task.id).filter(function (r) { return r.kind === "capture" && r.payload.calibration && !known[r.uuid] && r.state !== "refused"; });
    const rows = server.map(function (c) {
      const label = c.status === "passed" ? "✓ Passed" : c.status === "failed" ? "✕ Failed" : "⏳ Awaiting recording";
      return h("li", { class: "calib-" + c.status }, h("strong", { text: label }), " — " + c.detail);
    }).concat(local.map(function (r) {
      return h("li", { class: "calib-awaiting" }, h("strong", { text: r.state === "pending" ? "⏳ Recorded, waiting to sync" : "⏳ Awaiting recording" }),
        " — recorded " + fmtClock(r.client_created_at));
    }));
    return h("div", { class: "calibration" },
      rows.length ? h("ul", { class: "plain" }, rows) : h("p", { class: "muted", text: "No calibration episode recorded yet." }),
      h("button", { class: "tap big", type: "button", "data-action": "calibration", text: "Calibration episode recorded",
        onclick: function () { record(task, "capture", { target: null, outcome: "unknown", failure_mode: null, calibration: true }); } }),
      h("a", { class: "tap", href: config.scope + "tasks/" + task.id + "/captures/", text: "Capture report: recordings and their checks" }));
  }

  // Jump to any step: protocols run to hundreds of steps.
  function stepJump(task, index) {
    const select = h("select", { id: "step-jump", "aria-label": "Go to step",
      onchange: function (e) { go("#/task/" + task.id + "/step/" + e.target.value); } },
      (task.steps || []).map(function (st, i) {
        return h("option", { value: String(i), selected: i === index,
          text: (stepDone(task, st) ? "✓ " : "") + (i + 1) + ". " + st.title });
      }));
    return select;
  }

  function stepCard(task, index) {
    const steps = task.steps || [];
    const step = steps[index];
    const done = stepDone(task, step);
    const target = step.target ? (task.targets || []).find(function (t) { return t.id === step.target; }) : null;
    let extra = null;
    if (step.kind === "setup" && target && target.setup.length) {
      extra = h("ul", { class: "setup" }, target.setup.map(function (s) {
        return h("li", null, h("strong", { text: s.dimension + ": " + s.value }), s.instruction ? " — " + s.instruction : "");
      }));
    } else if (step.kind === "calibration") {
      extra = calibrationWidget(task);
    } else if (step.kind === "capture") {
      extra = [counter(task, target || null), recordingsSection(task)];
    }
    function next() { go("#/task/" + task.id + "/step/" + Math.min(steps.length - 1, index + 1)); }
    return h("section", { class: "step card", "data-step": step.id },
      h("div", { class: "step-head" },
        h("span", { class: "muted", text: "Step " + (index + 1) + " of " + steps.length }),
        done ? h("span", { class: "badge ok", text: "Done" }) : null,
        stepJump(task, index)),
      h("h2", { text: step.title }),
      step.instructions ? h("p", { class: "instructions", text: step.instructions }) : null,
      extra,
      h("div", { class: "button-row step-nav" },
        h("button", { class: "tap", type: "button", disabled: index === 0, text: "← Previous",
          onclick: function () { go("#/task/" + task.id + "/step/" + Math.max(0, index - 1)); } }),
        done
          ? h("button", { class: "tap big primary", type: "button", disabled: index === steps.length - 1, text: "Next step →", onclick: next })
          : h("button", { class: "tap big primary", type: "button", "data-action": "step-done", text: index === steps.length - 1 ? "Done" : "Done, next step →",
            onclick: function () {
              record(task, "step_done", { step: step.id, title: step.title }).then(function () { if (index < steps.length - 1) next(); });
            } })));
  }

  // ---- recordings: attach .mcap files, watch them upload and come back validated ----
  function attach(task, files) {
    let episode = null;
    if (files.length === 1) {
      // One file right after a capture: that capture's episode (unless a file already has it).
      const captures = allRecords(task.id).filter(function (r) { return r.kind === "capture" && !r.payload.calibration && r.state !== "refused"; });
      const last = captures[captures.length - 1];
      const claimed = last && uploads.items.some(function (i) { return i.episode === last.uuid; });
      if (last && !claimed && Date.now() - Date.parse(last.client_created_at) < EPISODE_LINK_MS) episode = last.uuid;
    }
    return uploads.add(task.id, files, { kind: "episode", episode: episode });
  }

  function uploadPercent(item) {
    const n = item.state === "hashing" ? item.hashed : item.state === "done" ? item.size : item.offset;
    return item.size ? Math.floor(100 * n / item.size) : 100;
  }

  function uploadProgress(item) {
    const pct = uploadPercent(item);
    const bytes = fmtBytes(item.state === "done" ? item.size : item.offset) + " of " + fmtBytes(item.size) + " · " + pct + "%";
    const wait = item.waiting ? WAITING[item.waiting] + " · " : "";
    if (item.state === "hashing") return "Checking the file (SHA-256) · " + pct + "%";
    if (item.state === "done") return "Uploaded " + bytes;
    if (item.state === "refused") return "Refused by the server · " + bytes;
    if (item.state === "lost") return "Not uploaded";
    // No room to keep the file on the tablet: it uploads from memory only.
    const note = item.volatile ? " · do not reload until it is sent" : "";
    return wait + (item.upload ? "Uploading " : "Starting ") + bytes + note;
  }

  // Redraw one upload's progress in place: no full render per chunk, so taps are never lost.
  function showUpload(item) {
    const row = document.querySelector('[data-upload="' + item.id + '"]');
    if (!row) return;
    row.dataset.state = item.state;
    row.dataset.offset = String(item.offset);
    row.dataset.waiting = item.waiting || "";
    row.querySelector(".up-progress").textContent = uploadProgress(item);
    row.querySelector(".meter span").style.width = uploadPercent(item) + "%";
  }

  function pendingVerdict(rec) { return !rec || rec.status === "received" || rec.status === "validating"; }

  function verdict(rec) {
    const checks = rec.failed_checks || [];
    return h("div", { class: "verdict verdict-" + rec.status, "data-verdict": rec.status },
      h("strong", { text: VERDICTS[rec.status] || rec.status }),
      rec.status === "failed" && checks.length ? h("ul", null, checks.map(function (c) {
        return h("li", { text: c.name + ": " + c.message });
      })) : null,
      (rec.status === "unreadable" || (rec.status === "failed" && !checks.length)) && rec.message ? h("p", { class: "muted", text: rec.message }) : null);
  }

  function uploadRow(item, rec) {
    const pct = item ? uploadPercent(item) : 100;
    const open = item && ["hashing", "queued", "sending"].indexOf(item.state) >= 0;
    return h("li", { class: "upload", "data-upload": item ? item.id : null, "data-recording": rec ? rec.id : null,
      "data-name": item ? item.name : rec.original_name, "data-state": item ? item.state : "done",
      "data-offset": item ? String(item.offset) : null, "data-waiting": item ? item.waiting || "" : null },
    h("div", { class: "upload-head" },
      h("strong", { text: item ? item.name : rec.original_name }),
      item && item.episode ? h("span", { class: "muted", text: "episode of " + fmtClock((allRecords(item.task).find(function (r) { return r.uuid === item.episode; }) || {}).client_created_at) }) : null),
    item ? h("span", { class: "up-progress muted", text: uploadProgress(item) }) : null,
    item && item.state !== "done" ? h("div", { class: "meter" }, h("span", { style: "width:" + pct + "%" })) : null,
    item && item.detail && !open ? h("p", { class: "up-detail", text: item.detail }) : null,
    rec ? verdict(rec) : item && item.state === "done" ? h("div", { class: "verdict" }, h("strong", { text: VERDICTS.received })) : null,
    item && item.state !== "done" ? h("div", { class: "button-row" },
      item.state === "refused" ? h("button", { class: "tap", type: "button", "data-action": "retry-upload", text: "Try again",
        onclick: function () { uploads.retry(item.id); } }) : null,
      h("button", { class: "tap", type: "button", "data-action": open ? "cancel-upload" : "dismiss-upload", text: open ? "Cancel upload" : "Dismiss",
        onclick: function () { uploads.remove(item.id); } })) : null);
  }

  function recordingsOf(taskId) { return state.recordings[taskId] || state.meta["recordings:" + taskId] || []; }

  function recordingsSection(task) {
    const links = recordingsOf(task.id);
    const mine = uploads ? uploads.items.filter(function (i) { return i.task === task.id; }) : [];
    const bySha = {};
    links.forEach(function (l) { bySha[l.recording.sha256] = l.recording; });
    const shas = {};
    const rows = mine.slice().reverse().map(function (item) {
      shas[item.sha256] = true;
      // The upload's own answer, until a list fetched after it finished says more.
      let rec = bySha[item.sha256] || null;
      if (item.recording && (!rec || (polledAt[task.id] || 0) < item.finished_at)) rec = item.recording;
      return uploadRow(item, item.state === "done" ? rec : null);
    }).concat(links.filter(function (l) { return !shas[l.recording.sha256]; }).map(function (l) { return uploadRow(null, l.recording); }));
    const input = h("input", { id: "recordings-input", type: "file", multiple: true, accept: ".mcap", class: "file-hidden",
      "data-action": "attach-recordings",
      onchange: function (e) {
        const files = Array.prototype.slice.call(e.target.files || []);
        e.target.value = "";
        if (files.length) attach(task, files);
      } });
    return h("section", { class: "recordings" },
      h("h3", { text: "Recordings" }),
      h("label", { class: "tap big button-like", for: "recordings-input" }, "Attach recordings (.mcap)", input),
      h("p", { class: "muted", text: "They upload in the background and resume after a lost connection or a reload; keep capturing meanwhile." }),
      rows.length ? h("ul", { class: "plain uploads" }, rows) : null);
  }

  // Ask the server for the task's recordings while a verdict is outstanding.
  let polling = null;
  const polledAt = {};
  function pollRecordings(force) {
    const r = route();
    if (r.view !== "task" || !uploads || polling || !navigator.onLine || !taskById(r.id)) return;
    const links = recordingsOf(r.id);
    const waiting = links.some(function (l) { return pendingVerdict(l.recording); }) || uploads.items.some(function (i) {
      return i.task === r.id && i.state === "done" && Date.now() - i.finished_at < 60000 &&
        !links.some(function (l) { return l.recording.sha256 === i.sha256 && !pendingVerdict(l.recording); });
    });
    if (!force && !waiting && Date.now() - (polledAt[r.id] || 0) < 60000) return;
    const asked = Date.now();
    polling = uploads.list(r.id).then(function (list) {
      polledAt[r.id] = asked;
      const same = JSON.stringify(list) === JSON.stringify(links);
      state.recordings[r.id] = list;
      if (same) return;
      render();
      return store.setMeta("recordings:" + r.id, list);
    }).catch(function () {}).then(function () { polling = null; });
  }

  let drawing = false;
  function onUpload(item, what) {
    if (what === "progress" && item) { showUpload(item); return; }
    if (what === "done") pollRecordings(true);
    if (drawing) return;
    drawing = true;
    Promise.resolve().then(function () { drawing = false; render(); });
  }

  function notesSection(task) {
    const draft = state.drafts[task.id] || "";
    const mine = allRecords(task.id).filter(function (r) { return r.kind === "note"; });
    const ids = {};
    mine.forEach(function (r) { ids[r.uuid] = true; });
    const others = (task.notes || []).filter(function (n) { return !ids[n.uuid]; });
    const items = mine.map(function (r) {
      return h("li", { class: "note-" + r.state }, h("span", { class: "muted", text: fmtClock(r.client_created_at) + " · " + recordState(r) + " — " }), r.payload.text);
    }).concat(others.map(function (n) {
      return h("li", null, h("span", { class: "muted", text: fmtClock(n.at) + " · " + n.author + " — " }), n.text);
    }));
    const area = h("textarea", { id: "note-text", rows: "3", placeholder: "What should the manager know?",
      oninput: function (e) { state.drafts[task.id] = e.target.value; } });
    area.value = draft;
    return h("section", { class: "card" },
      h("h2", { text: "Notes" }),
      area,
      h("div", { class: "button-row" },
        h("button", { class: "tap", type: "button", "data-action": "note", text: "Save note", onclick: function () {
          const text = (state.drafts[task.id] || "").trim();
          if (!text) return;
          state.drafts[task.id] = "";
          record(task, "note", { text: text });
        } })),
      items.length ? h("ul", { class: "plain notes" }, items) : null);
  }

  function photoSection(task) {
    const photos = allRecords(task.id).filter(function (r) { return r.kind === "photo"; });
    const input = h("input", { id: "photo-input", type: "file", accept: "image/*", capture: "environment", class: "file-hidden",
      onchange: function (e) {
        const file = e.target.files && e.target.files[0];
        if (!file) return;
        shrink(file).then(function (blob) {
          return record(task, "photo", { caption: "" }, { blob: blob, filename: file.name || "photo.jpg" });
        });
        e.target.value = "";
      } });
    return h("section", { class: "card" },
      h("h2", { text: "Setup photo" }),
      h("label", { class: "tap button-like", for: "photo-input" }, "Take a photo of the setup", input),
      photos.length ? h("div", { class: "thumbs" }, photos.map(function (r) {
        let src = r.photo_url;
        if (r.blob) { thumbs[r.uuid] = thumbs[r.uuid] || URL.createObjectURL(r.blob); src = thumbs[r.uuid]; }
        return h("figure", null, src ? h("img", { src: src, alt: "Setup photo" }) : null,
          h("figcaption", { class: "muted", text: fmtClock(r.client_created_at) + " · " + recordState(r) }));
      })) : null);
  }

  function recordState(r) {
    if (r.state === "pending") return "waiting to sync";
    if (r.state === "refused") return "refused by the server";
    if (r.stale_reason) return STALE_LABELS[r.stale_reason] || "stored, flagged";
    return "synced";
  }

  function activity(task) {
    const rows = allRecords(task.id).slice(-12).reverse();
    if (!rows.length) return null;
    return h("section", { class: "card" },
      h("h2", { text: "Recorded here" }),
      h("ul", { class: "plain log" }, rows.map(function (r) {
        let what = KIND_LABELS[r.kind] || r.kind;
        if (r.kind === "capture") what = r.payload.calibration ? "Calibration episode" : "Episode: " + r.payload.outcome;
        return h("li", { class: "rec-" + r.state + (r.stale_reason ? " rec-stale" : "") },
          h("span", { text: fmtClock(r.client_created_at) + " " + what }),
          h("span", { class: "muted", text: recordState(r) }));
      })));
  }

  function taskView(r) {
    const task = taskById(r.id);
    if (!task) {
      return h("div", null, h("a", { class: "tap back", href: "#/", text: "← All tasks" }),
        h("p", { class: "muted", text: state.loaded ? "This task is not on this tablet." : "Loading…" }));
    }
    const steps = task.steps || [];
    const index = r.step === null ? firstOpenStep(task) : Math.min(Math.max(0, r.step), Math.max(0, steps.length - 1));
    return h("div", { class: "task-view", "data-task": task.id },
      h("a", { class: "tap back", href: "#/", text: "← All tasks" }),
      h("div", { class: "task-title" }, h("h1", { text: task.site.name }), statusBadge(localStatus(task))),
      h("p", { class: "task-meta" },
        fmtDay(task.scheduled_date),
        task.start_at ? " · " + visitTimes(task) : "",
        " · access: " + task.site.access_window),
      h("p", { class: "muted", text: (task.site.address || "No address on file") + " · " + task.campaign + ", round " + task.round + " · " + task.embodiment }),
      banners(task),
      statusActions(task),
      steps.length ? stepCard(task, index) : h("section", { class: "card" }, h("h2", { text: "Capture" }),
        (task.targets || []).length ? task.targets.map(function (t) { return counter(task, t); }) : counter(task, null),
        recordingsSection(task)),
      notesSection(task),
      photoSection(task),
      activity(task));
  }

  function panel() {
    const p = state.panel;
    if (!p) return null;
    const task = taskById(p.task);
    if (!task) return null;
    function close() { state.panel = null; render(); }
    if (p.kind === "failure") {
      const modes = state.meta.failure_modes || [];
      return h("div", { class: "overlay", role: "dialog", "aria-label": "Failure mode" },
        h("div", { class: "sheet" },
          h("h2", { text: "What failed?" }),
          h("div", { class: "pick" }, modes.map(function (m) {
            return h("button", { class: "tap", type: "button", "data-mode": m.code,
              onclick: function () { state.panel = null; capture(task, p.target, "failure", m.id, p.at); },
            }, h("strong", { text: m.name }), m.parent ? h("span", { class: "muted", text: " · " + m.parent }) : null);
          }), h("button", { class: "tap", type: "button", "data-mode": "", text: "Not sure",
            onclick: function () { state.panel = null; capture(task, p.target, "failure", null, p.at); } })),
          h("button", { class: "tap", type: "button", text: "Cancel", onclick: close })));
    }
    if (p.kind === "finish") {
      const open = (task.steps || []).filter(function (st) { return !stepDone(task, st); }).length;
      return h("div", { class: "overlay", role: "dialog", "aria-label": "Finish task" },
        h("div", { class: "sheet" },
          h("h2", { text: "Finish this task?" }),
          open ? h("p", { text: open + (open === 1 ? " step is" : " steps are") + " not checked off yet." }) : null,
          h("div", { class: "button-row" },
            h("button", { class: "tap big primary", type: "button", "data-action": "finish-confirm", text: "Yes, finish",
              onclick: function () { state.panel = null; record(task, "finish"); } }),
            h("button", { class: "tap big", type: "button", text: "Cancel", onclick: close }))));
    }
    const detail = h("input", { id: "block-detail", type: "text", maxlength: "300", placeholder: "Details (optional)" });
    return h("div", { class: "overlay", role: "dialog", "aria-label": "Report blocker" },
      h("div", { class: "sheet" },
        h("h2", { text: "What is blocking the task?" }),
        detail,
        h("div", { class: "pick" }, (state.meta.block_reasons || []).map(function (b) {
          return h("button", { class: "tap", type: "button", "data-reason": b.code, text: b.label,
            onclick: function () { state.panel = null; record(task, "blocked", { reason: b.code, detail: detail.value.trim() }); } });
        })),
        h("button", { class: "tap", type: "button", text: "Cancel", onclick: close })));
  }

  function notices() {
    const out = [];
    if (sync && sync.lastError) {
      out.push(h("div", { class: "banner bad" }, sync.lastError + " ",
        sync.authProblem ? h("a", { class: "tap", href: config.login, text: "Sign in" }) : null));
    }
    if (state.conflicts.length) {
      const refused = state.conflicts.slice().sort(function (a, b) { return a.client_created_at < b.client_created_at ? -1 : 1; });
      out.push(h("div", { class: "banner bad conflicts", role: "alert" },
        h("strong", { text: refused.length + (refused.length === 1 ? " record was" : " records were") + " refused by the server" }),
        h("p", { class: "muted", text: "Not stored and not sent again. Copy what you need (or record it again), then dismiss." }),
        h("ul", { class: "refused" }, refused.map(refusedItem))));
    }
    return out;
  }

  // What a refused record said, as text the person can read and copy.
  function recordText(c) {
    const p = c.payload || {};
    if (c.kind === "note") return p.text || "";
    if (c.kind === "capture") return p.calibration ? "Calibration episode" : "Episode: " + (p.outcome || "success");
    if (c.kind === "blocked") return (p.reason || "") + (p.detail ? ": " + p.detail : "");
    if (c.kind === "step_done") return p.title || "";
    if (c.kind === "photo") return p.caption || c.filename || "";
    return "";
  }

  function refusedItem(c) {
    const task = taskById(c.task);
    const why = c.status === 409
      ? "its ID was already used for different content" + (c.stored ? " (stored " + fmtClock(c.stored.received_at) + ")" : "") + "; this version was not stored."
      : c.detail || "refused (" + c.status + ").";
    const text = recordText(c);
    const copy = [KIND_LABELS[c.kind] || c.kind, c.client_created_at, task ? task.site.name : "task " + c.task, text].join(" · ");
    return h("li", { class: "refused-record", "data-uuid": c.uuid, "data-status": String(c.status) },
      h("strong", { text: (KIND_LABELS[c.kind] || c.kind) + " at " + fmtClock(c.client_created_at) + (task ? " · " + task.site.name : "") }),
      text ? h("blockquote", { class: "refused-content", text: text }) : null,
      h("span", { class: "refused-reason", text: why }),
      h("span", { class: "button-row" },
        h("button", { class: "tap", type: "button", "data-action": "dismiss-refused", text: "Dismiss",
          onclick: function () { store.remove("conflicts", c.uuid).then(reload); } }),
        navigator.clipboard ? h("button", { class: "tap", type: "button", "data-action": "copy-refused", text: "Copy",
          onclick: function (e) { navigator.clipboard.writeText(copy).then(function () { e.target.textContent = "Copied"; }, function () {}); } }) : null));
  }

  function statusBar() {
    const net = document.getElementById("net");
    const box = document.getElementById("outbox");
    const online = sync ? sync.online() : navigator.onLine;
    const syncing = sync && sync.running;
    if (net) {
      net.dataset.state = online ? (syncing ? "syncing" : "online") : "offline";
      net.textContent = online ? (syncing ? "Online · syncing…" : "Online") : "Offline";
    }
    if (box) {
      const n = state.outbox.length;
      box.dataset.count = String(n);
      box.textContent = n ? n + " waiting to sync" : "All synced";
    }
  }

  function render() {
    const active = document.activeElement && document.activeElement.id;
    statusBar();
    const notes = document.getElementById("notices");
    notes.replaceChildren.apply(notes, [].concat(notices()));
    const app = document.getElementById("app");
    const r = route();
    app.replaceChildren(r.view === "task" ? taskView(r) : listView());
    const p = panel();
    if (p) app.appendChild(p);
    if (active) {
      const el = document.getElementById(active);
      if (el && el.focus) el.focus();
    }
  }

  let reloading = null;
  function reload() {
    if (reloading) return reloading;
    reloading = Promise.all([
      store.all("tasks"), store.outbox(), store.all("sent"), store.all("conflicts"), store.all("meta"), store.all("takes"),
    ]).then(function (res) {
      reloading = null;
      state.tasks = res[0];
      state.outbox = res[1];
      state.sent = res[2];
      state.conflicts = res[3];
      state.meta = {};
      res[4].forEach(function (m) { state.meta[m.key] = m.value; });
      state.takes = {};
      res[5].forEach(function (t) { state.takes[t.key] = t; });
      state.loaded = true;
      render();
    }, function (err) { reloading = null; throw err; });
    return reloading;
  }

  function start() {
    if (!window.indexedDB) {
      document.getElementById("notices").appendChild(h("div", { class: "banner bad", text: "This browser cannot keep records offline (no IndexedDB)." }));
      return;
    }
    window.FieldStore.open(config.user || "anon").then(function (s) {
      store = s;
      let pending = false;
      sync = new window.FieldSync.Sync(store, config, function () {
        if (pending) return;
        pending = true;
        Promise.resolve().then(function () { pending = false; reload(); });
      });
      uploads = new window.FieldSync.Uploads(store, config, onUpload, sync);
      window.addEventListener("hashchange", function () { state.panel = null; render(); window.scrollTo(0, 0); pollRecordings(true); });
      document.getElementById("sync-now").addEventListener("click", function () { sync.run(true); uploads.kick(true); });
      window.fieldApp = { state: state, sync: sync, store: store, uploads: uploads, reload: reload };
      setInterval(pollRecordings, 3000);
      setInterval(tickTakes, 250);
      return reload().then(function () {
        sync.start();
        pollRecordings(true);
        return uploads.start();
      });
    }).catch(function (err) {
      document.getElementById("notices").appendChild(h("div", { class: "banner bad", text: "The offline store could not open: " + err.message }));
    });
    if ("serviceWorker" in navigator && config.sw) {
      navigator.serviceWorker.register(config.sw, { scope: config.scope }).catch(function () { /* works online without it */ });
    }
    if (navigator.storage && navigator.storage.persist) navigator.storage.persist().catch(function () {});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
