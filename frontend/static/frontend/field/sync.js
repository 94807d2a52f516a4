// Fieldcraft field app: the sync loop.
// Every action is written to the outbox first (IndexedDB), then sent. A record leaves the
// outbox only when the server answers 200/201 (stored) or refuses that record for good (409
// conflict, 400 malformed, 403 not the team's task, 404 unknown task): refused records go to
// `conflicts`, with the reason and their full content, and are shown until the person
// dismisses them; they are never resent. Anything else (no network, a timeout, a 5xx, a lost
// response, a signed-out 403) keeps it in the outbox and retries with exponential backoff and
// jitter. Resending is safe: the server is idempotent on the record's UUID.
// A batch refused as a whole (400 without per-record answers) is resent one record at a
// time, so that one bad record is refused alone and never holds up the rest of the queue.
(function () {
  "use strict";

  const BATCH = 50;
  const TICK_MS = 5000;
  const REFRESH_MS = 60000;
  const MAX_BACKOFF_MS = 60000;
  const KEEP_SENT_MS = 7 * 24 * 3600 * 1000;
  const REFUSED = [400, 403, 404, 409];  // a per-record answer with one of these is final

  function csrfToken() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function withTimeout(ms) {
    const controller = new AbortController();
    const timer = setTimeout(function () { controller.abort(); }, ms);
    return { signal: controller.signal, done: function () { clearTimeout(timer); } };
  }

  function HttpError(status, message) {
    this.status = status;
    this.message = message;
  }

  function Sync(store, config, onChange) {
    this.store = store;
    this.config = config;
    this.onChange = onChange;
    this.running = false;
    this.again = false;
    this.failures = 0;
    this.backoffUntil = 0;
    this.lastRefresh = 0;
    this.reachable = navigator.onLine;
    this.authProblem = false;
    this.lastError = "";
    this.lastSyncAt = null;
  }

  Sync.prototype.start = function () {
    const self = this;
    window.addEventListener("online", function () { self.failures = 0; self.backoffUntil = 0; self.run(true); });
    window.addEventListener("offline", function () { self.reachable = false; self.onChange(); });
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") self.run(false);
    });
    setInterval(function () { self.tick(); }, TICK_MS);
    this.run(true);
  };

  Sync.prototype.online = function () { return navigator.onLine && this.reachable; };

  Sync.prototype.tick = function () {
    if (Date.now() < this.backoffUntil) return;
    const self = this;
    this.store.outbox().then(function (rows) {
      if (rows.length || Date.now() - self.lastRefresh > REFRESH_MS) self.run(false);
    });
  };

  // Write a new record to the outbox, then try to send it straight away.
  Sync.prototype.enqueue = function (record) {
    const self = this;
    record.seq = Date.now() * 1000 + Math.floor(Math.random() * 1000);
    record.attempts = 0;
    return this.store.put("outbox", record).then(function () {
      self.onChange();
      if (Date.now() >= self.backoffUntil) self.run(false);
    });
  };

  // force: the person asked (or the network came back): ignore the backoff and refresh tasks.
  Sync.prototype.run = function (force) {
    const self = this;
    if (force) { this.backoffUntil = 0; }
    if (this.running) { this.again = true; return Promise.resolve(); }
    if (!force && Date.now() < this.backoffUntil) return Promise.resolve();
    this.running = true;
    this.onChange();
    return this.flush()
      .then(function (confirmed) {
        if (confirmed || force || Date.now() - self.lastRefresh > REFRESH_MS) return self.refresh();
        return null;
      })
      .then(function () {
        self.failures = 0;
        self.backoffUntil = 0;
        self.reachable = true;
        self.authProblem = false;
        self.lastError = "";
        self.lastSyncAt = new Date();
      })
      .catch(function (err) {
        self.failures += 1;
        const base = Math.min(MAX_BACKOFF_MS, 1000 * Math.pow(2, self.failures - 1));
        self.backoffUntil = Date.now() + base * (0.5 + Math.random());
        if (err instanceof HttpError) {
          self.reachable = true;
          self.authProblem = err.status === 401 || err.status === 403;
          self.lastError = self.authProblem ? "Signed out: sign in again to sync. Your records are kept on this tablet." : err.message;
        } else {
          self.reachable = false;
          self.lastError = "";
        }
      })
      .then(function () {
        self.running = false;
        self.onChange();
        if (self.again) { self.again = false; self.run(false); }
      });
  };

  // Send everything in the outbox; resolve with how many records the server confirmed.
  Sync.prototype.flush = function () {
    const self = this;
    let confirmed = 0;
    let before = -1;
    function round() {
      return self.store.outbox().then(function (rows) {
        // Stop when a round moved nothing out of the outbox (the next run tries again).
        if (!rows.length || rows.length === before) return confirmed;
        before = rows.length;
        const plain = rows.filter(function (r) { return r.kind !== "photo"; }).slice(0, BATCH);
        const photo = rows.filter(function (r) { return r.kind === "photo"; })[0];
        const sending = plain.length ? self.sendBatch(plain) : self.sendPhoto(photo);
        return sending.then(function (n) { confirmed += n; return round(); });
      });
    }
    return round();
  };

  // A record's own answer (as opposed to a whole-request refusal such as a signed-out 403).
  function isOutcome(data) {
    return !!data && typeof data.status === "number" && "uuid" in data && "record" in data;
  }

  Sync.prototype.post = function (url, body, headers, ms) {
    const t = withTimeout(ms);
    const h = Object.assign({ "X-CSRFToken": csrfToken(), Accept: "application/json" }, headers || {});
    return fetch(url, { method: "POST", body: body, headers: h, credentials: "same-origin", signal: t.signal })
      .then(function (response) {
        t.done();
        const status = response.status;
        if (status === 200 || status === 201 || (REFUSED.indexOf(status) >= 0 && status !== 403)) {
          // A refusal may come from outside the API (an HTML error page): still an answer.
          return response.json().then(null, function () { return status >= 400 ? {} : null; })
            .then(function (data) { return { status: status, data: data }; });
        }
        const retry = new HttpError(status, "The server answered " + status + "; retrying.");
        if (status === 403) {
          // One record refused (another team's task) or the whole request (signed out)?
          return response.json().then(function (data) {
            if (isOutcome(data)) return { status: status, data: data };
            throw retry;
          }, function () { throw retry; });
        }
        throw retry;
      }, function (err) { t.done(); throw err; });
  };

  function wire(r) {
    return {
      uuid: r.uuid, kind: r.kind, task: r.task, payload: r.payload,
      client_created_at: r.client_created_at, task_version_seen: r.task_version_seen,
      task_seen: r.task_seen || "",
    };
  }

  Sync.prototype.sendBatch = function (rows) {
    const self = this;
    const body = JSON.stringify(rows.map(wire));
    return this.post(this.config.records, body, { "Content-Type": "application/json" }, 20000)
      .then(function (answer) {
        const results = answer.data && answer.data.results;
        if (answer.status === 400 && !Array.isArray(results)) return self.sendEach(rows);
        if (answer.status !== 200 || !Array.isArray(results)) {
          throw new HttpError(answer.status, (answer.data && answer.data.detail) || "The batch was refused.");
        }
        const byUuid = {};
        rows.forEach(function (r) { byUuid[r.uuid] = r; });
        // One answer per record, in the order sent (a malformed UUID is answered as null).
        return Promise.all(results.map(function (res, i) {
          const local = byUuid[res.uuid] || rows[i];
          return local ? self.settle(local, res) : 0;
        })).then(sum);
      });
  };

  function sum(counts) { return counts.reduce(function (a, b) { return a + b; }, 0); }

  // The batch was refused as a whole: send its records one by one, each answered alone.
  Sync.prototype.sendEach = function (rows) {
    const self = this;
    let confirmed = 0;
    return rows.reduce(function (chain, r) {
      return chain.then(function () {
        const body = JSON.stringify(wire(r));
        return self.post(self.config.records, body, { "Content-Type": "application/json" }, 20000)
          .then(function (answer) { return self.settle(r, answer.data, answer.status); })
          .then(function (n) { confirmed += n; });
      });
    }, Promise.resolve()).then(function () { return confirmed; });
  };

  Sync.prototype.sendPhoto = function (r) {
    const self = this;
    const form = new FormData();
    form.append("uuid", r.uuid);
    form.append("task", String(r.task));
    form.append("client_created_at", r.client_created_at);
    form.append("task_version_seen", String(r.task_version_seen));
    form.append("task_seen", r.task_seen || "");
    form.append("caption", (r.payload && r.payload.caption) || "");
    form.append("file", r.blob, r.filename || "photo.jpg");
    return this.post(this.config.photos, form, {}, 120000).then(function (answer) {
      return self.settle(r, answer.data, answer.status);
    });
  };

  // Apply the server's answer for one record; resolve 1 when it is stored on the server.
  // httpStatus: the response's own status, for a record sent alone (its answer may be a
  // whole-request refusal without a per-record status).
  Sync.prototype.settle = function (local, answer, httpStatus) {
    const res = isOutcome(answer) ? answer : Object.assign({ detail: "" }, answer || {}, { status: httpStatus });
    const status = res.status;
    if (status === 200 || status === 201) {
      const record = res.record || {};
      return this.store.settle(local.uuid, "sent", {
        uuid: local.uuid, kind: local.kind, task: local.task, payload: local.payload,
        client_created_at: local.client_created_at, task_version_seen: local.task_version_seen,
        received_at: record.received_at, stale_reason: record.stale_reason || "",
        result: record.result || {}, confirmed_at: Date.now(), photo_url: record.photo_url || null,
      }).then(function () { return 1; });
    }
    if (REFUSED.indexOf(status) >= 0) {
      // Everything the person needs to read, copy or redo the record stays on the tablet.
      const row = {
        uuid: local.uuid, kind: local.kind, task: local.task, payload: local.payload,
        client_created_at: local.client_created_at, task_version_seen: local.task_version_seen,
        status: status, detail: res.detail || "", field: res.field || null,
        stored: res.conflict ? res.conflict.stored : null, refused_at: Date.now(),
        blob: local.blob || null, filename: local.filename || null,
      };
      return this.store.settle(local.uuid, "conflicts", row).then(function () { return 0; });
    }
    return Promise.resolve(0);  // anything else stays in the outbox for the next round
  };

  Sync.prototype.refresh = function () {
    const self = this;
    const t = withTimeout(20000);
    return fetch(this.config.tasks, { credentials: "same-origin", headers: { Accept: "application/json" }, signal: t.signal })
      .then(function (response) {
        t.done();
        if (!response.ok || response.redirected) throw new HttpError(response.status === 200 ? 403 : response.status, "Could not load tasks (" + response.status + ").");
        if (response.headers.get("X-Fieldcraft-Offline")) throw new Error("offline");
        return response.json();
      }, function (err) { t.done(); throw err; })
      .then(function (data) { return self.merge(data); })
      .then(function () {
        self.lastRefresh = Date.now();
        return self.store.pruneSent(KEEP_SENT_MS);
      });
  };

  function describeChanges(before, after) {
    const changes = [];
    if (before.status !== after.status) changes.push("status " + before.status_label + " → " + after.status_label);
    if ((before.team || "") !== (after.team || "")) changes.push("team " + (before.team || "none") + " → " + (after.team || "none"));
    if (before.scheduled_date !== after.scheduled_date || before.start_at !== after.start_at) {
      changes.push("time moved to " + (after.scheduled_date || "unscheduled") + (after.start_at ? " " + after.start_at.slice(11, 16) + " UTC" : ""));
    }
    const old = {};
    (before.targets || []).forEach(function (t) { old[t.id] = t; });
    const seen = {};
    (after.targets || []).forEach(function (t) {
      seen[t.id] = true;
      if (!old[t.id]) changes.push("target added: " + t.label + " (" + t.episodes_planned + ")");
      else if (old[t.id].episodes_planned !== t.episodes_planned) {
        changes.push(t.label + ": " + old[t.id].episodes_planned + " → " + t.episodes_planned + " episodes");
      }
    });
    (before.targets || []).forEach(function (t) { if (!seen[t.id]) changes.push("target removed: " + t.label); });
    if ((before.steps || []).length !== (after.steps || []).length) {
      changes.push("protocol now has " + (after.steps || []).length + " steps");
    }
    if (after.blocked_reason && after.blocked_reason !== before.blocked_reason) changes.push("note: " + after.blocked_reason);
    if (!changes.length) changes.push("details updated (version " + before.version + " → " + after.version + ")");
    return changes;
  }

  // Store the server's tasks. A newer version than the tablet had is recorded as a change to
  // show; a task that vanished is kept (flagged) while the tablet still holds records for it.
  Sync.prototype.merge = function (data) {
    const store = this.store;
    return store.meta("server_time").then(function (previous) {
      if (previous && data.server_time && Date.parse(data.server_time) < Date.parse(previous)) return null;  // an older snapshot
      return store.tx(["tasks", "meta", "outbox"], "readwrite", function (s) {
        return Promise.all([
          new Promise(function (res) { const q = s.tasks.getAll(); q.onsuccess = function () { res(q.result); }; }),
          new Promise(function (res) { const q = s.outbox.getAll(); q.onsuccess = function () { res(q.result); }; }),
        ]).then(function (both) {
          const local = {};
          both[0].forEach(function (t) { local[t.id] = t; });
          const pending = {};
          both[1].forEach(function (r) { pending[r.task] = (pending[r.task] || 0) + 1; });
          const arrived = {};
          data.tasks.forEach(function (task) {
            arrived[task.id] = true;
            const before = local[task.id];
            const row = Object.assign({}, task, { changes: before ? before.changes || [] : [], removed: false });
            if (before && !before.removed && task.version > before.version) {
              row.changes = row.changes.concat([{ from: before.version, to: task.version, items: describeChanges(before, task), at: data.server_time }]);
            }
            if (before && task.version < before.version) return;  // never step back
            s.tasks.put(row);
          });
          both[0].forEach(function (t) {
            if (arrived[t.id]) return;
            if (!t.removed) {
              t.removed = true;
              t.changes = (t.changes || []).concat([{ from: t.version, to: null, at: data.server_time,
                items: ["no longer on your team's list (reassigned, moved or cancelled)"] }]);
              s.tasks.put(t);
            } else if (!pending[t.id] && !(t.changes || []).length) {
              s.tasks.delete(t.id);
            }
          });
          s.meta.put({ key: "server_time", value: data.server_time });
          s.meta.put({ key: "today", value: data.today });
          s.meta.put({ key: "failure_modes", value: data.failure_modes });
          s.meta.put({ key: "block_reasons", value: data.block_reasons });
          s.meta.put({ key: "fetched_at", value: Date.now() });
        });
      });
    });
  };

  window.FieldSync = { Sync: Sync, csrfToken: csrfToken };
})();
