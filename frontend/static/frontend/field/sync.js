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
      changes.push("time moved to " + (after.scheduled_date || "unscheduled") + (after.start_at ? " " + (after.local_window || after.start_at.slice(11, 16) + " UTC") : ""));
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

  // ---- SHA-256 of a file of any size ----
  // Web Crypto digests one buffer, not a stream, and is missing on plain-HTTP pages; a file of
  // several GB is read in slices and hashed here, a few MB at a time between input events.
  const HASH_SLICE = 64 * 1024 * 1024;
  const HASH_STEP = 2 * 1024 * 1024;
  const K256 = new Int32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);

  function Sha256() {
    this.h = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Int32Array(64);
    this.buf = new Uint8Array(64);
    this.fill = 0;
    this.length = 0;
  }

  // Compress the whole 64-byte blocks of bytes[p..end); return where the rest starts.
  Sha256.prototype.blocks = function (bytes, p, end) {
    const w = this.w;
    const H = this.h;
    while (end - p >= 64) {
      for (let i = 0; i < 16; i++, p += 4) w[i] = (bytes[p] << 24) | (bytes[p + 1] << 16) | (bytes[p + 2] << 8) | bytes[p + 3];
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15];
        const y = w[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], k = H[7];
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K256[i] + w[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      H[0] = (H[0] + a) | 0; H[1] = (H[1] + b) | 0; H[2] = (H[2] + c) | 0; H[3] = (H[3] + d) | 0;
      H[4] = (H[4] + e) | 0; H[5] = (H[5] + f) | 0; H[6] = (H[6] + g) | 0; H[7] = (H[7] + k) | 0;
    }
    return p;
  };

  Sha256.prototype.update = function (bytes) {
    const n = bytes.length;
    let p = 0;
    this.length += n;
    if (this.fill) {
      p = Math.min(64 - this.fill, n);
      this.buf.set(bytes.subarray(0, p), this.fill);
      this.fill += p;
      if (this.fill < 64) return this;
      this.blocks(this.buf, 0, 64);
      this.fill = 0;
    }
    p = this.blocks(bytes, p, n);
    if (p < n) { this.buf.set(bytes.subarray(p), 0); this.fill = n - p; }
    return this;
  };

  // The message length in bits as SHA-256 appends it: 64-bit big-endian (files past 4 GB too).
  function lengthBytes(n) {
    const hi = Math.floor(n / 0x20000000);  // n * 8 / 2^32
    const lo = (n % 0x20000000) * 8;
    return [hi >>> 24, (hi >>> 16) & 255, (hi >>> 8) & 255, hi & 255, lo >>> 24, (lo >>> 16) & 255, (lo >>> 8) & 255, lo & 255];
  }

  Sha256.prototype.hex = function () {
    const zeros = (this.fill < 56 ? 56 : 120) - this.fill;
    const pad = new Uint8Array(zeros + 8);
    pad[0] = 0x80;
    pad.set(lengthBytes(this.length), zeros);
    this.update(pad);
    return Array.prototype.map.call(this.h, function (x) { return ((x >>> 0) + 0x100000000).toString(16).slice(1); }).join("");
  };

  function toHex(bytes) {
    return Array.prototype.map.call(bytes, function (x) { return (x + 0x100).toString(16).slice(1); }).join("");
  }

  // A macrotask boundary that timers' throttling does not stretch: taps and paints run here.
  function yieldToPage() {
    return new Promise(function (resolve) {
      const channel = new MessageChannel();
      channel.port1.onmessage = function () { channel.port1.close(); resolve(); };
      channel.port2.postMessage(0);
    });
  }

  // Hex SHA-256 of a Blob/File. Web Crypto for a file that fits one slice, else slices of
  // `slice` bytes hashed `step` bytes at a time; onProgress(bytes hashed so far).
  async function sha256Blob(blob, options) {
    const o = Object.assign({ slice: HASH_SLICE, step: HASH_STEP, subtle: true, onProgress: null }, options || {});
    const subtle = o.subtle && window.crypto && window.crypto.subtle;
    if (subtle && blob.size <= o.slice) {
      const digest = await subtle.digest("SHA-256", await blob.arrayBuffer());
      if (o.onProgress) o.onProgress(blob.size);
      return toHex(new Uint8Array(digest));
    }
    const hash = new Sha256();
    for (let at = 0; at < blob.size; at += o.slice) {
      const bytes = new Uint8Array(await blob.slice(at, at + o.slice).arrayBuffer());
      for (let p = 0; p < bytes.length; p += o.step) {
        hash.update(bytes.subarray(p, p + o.step));
        if (o.onProgress) o.onProgress(at + Math.min(bytes.length, p + o.step));
        await yieldToPage();
      }
    }
    return hash.hex();
  }

  // ---- recording uploads ----
  // Each attached file is a row in `uploads` (its File in `upload_files`) until the server
  // holds it. The row keeps the server's upload id and the last offset it confirmed, but
  // the server is the authority: after any failure, and after a reload, the next chunk is
  // sent from the offset the server reports (GET), and a 409 carries the offset to use.
  // Chunks are sent one at a time, files one after another, while the next file is hashed.
  const UPLOAD_CHUNK = 4 * 1024 * 1024;
  const UPLOAD_BACKOFF_MAX_MS = 30000;
  const KEEP_UPLOADED_MS = 7 * 24 * 3600 * 1000;
  const SENDING = ["queued", "sending"];
  const LOCKED = new Error("another tab is sending this upload");

  function delay(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  async function call(method, url, body, headers, ms) {
    const t = withTimeout(ms);
    try {
      const response = await fetch(url, {
        method: method, body: body, credentials: "same-origin", signal: t.signal,
        headers: Object.assign({ "X-CSRFToken": csrfToken(), Accept: "application/json" }, headers || {}),
      });
      let data = null;
      try { data = await response.json(); } catch (e) { data = null; }
      return { status: response.status, data: data || {} };
    } finally {
      t.done();
    }
  }

  function Uploads(store, config, onChange, sync) {
    this.store = store;
    this.sync = sync;
    this.onChange = onChange;  // (item, "progress" | "state" | "done")
    this.chunk = Math.max(1024, Number(config.uploadChunk) || UPLOAD_CHUNK);
    this.taskUrl = config.taskRecordings;      // .../collection-tasks/0/recordings/
    this.uploadUrl = config.recordingUploads;  // .../recording-uploads/<zero uuid>/
    this.items = [];
    this.files = {};  // File objects at hand (all of them while this page lives)
    this.hashing = false;
    this.sending = false;
    this.failures = 0;
    this.wake = null;
  }

  Uploads.prototype.urlForTask = function (id) { return this.taskUrl.replace(/\/0\/recordings\/$/, "/" + id + "/recordings/"); };
  Uploads.prototype.urlForUpload = function (id) { return this.uploadUrl.replace(/[0-]{36}\/$/, id + "/"); };

  Uploads.prototype.start = async function () {
    const self = this;
    const rows = await this.store.all("uploads");
    const limit = Date.now() - KEEP_UPLOADED_MS;
    rows.sort(function (a, b) { return a.created_at - b.created_at; });
    for (const row of rows) {
      if (SENDING.indexOf(row.state) < 0 && row.state !== "hashing" && (row.finished_at || row.created_at) < limit) {
        await this.store.dropUpload(row.id);
        continue;
      }
      row.waiting = "";
      row.needsOffset = !!row.upload;  // what was confirmed before the reload may be stale
      this.items.push(row);
    }
    window.addEventListener("online", function () { self.failures = 0; self.kick(true); });
    window.addEventListener("offline", function () { self.items.forEach(function (i) { if (SENDING.indexOf(i.state) >= 0) self.waitFor(i, "offline"); }); });
    setInterval(function () { self.kick(false); }, 5000);
    this.onChange(null, "state");
    this.kick(false);
  };

  // Keep the files (in IndexedDB, so a reload resumes them) and start on them.
  Uploads.prototype.add = async function (taskId, files, options) {
    const o = options || {};
    const added = [];
    for (const file of files) {
      const item = {
        id: window.FieldStore.uuid4(), task: taskId, name: file.name, size: file.size,
        kind: o.kind || "episode", episode: o.episode || null, sha256: null, upload: null,
        offset: 0, hashed: 0, state: "hashing", waiting: "", detail: "", recording: null,
        created_at: Date.now(), finished_at: null, volatile: false,
      };
      this.files[item.id] = file;
      try {
        await this.store.addUpload(item, file);
      } catch (err) {
        // No room for the file: it still uploads from memory, but a reload loses it.
        item.volatile = true;
        await this.save(item);
      }
      this.items.push(item);
      added.push(item);
    }
    this.onChange(null, "state");
    this.kick(false);
    return added;
  };

  Uploads.prototype.save = function (item, relaxed) {
    const row = Object.assign({}, item);
    return (relaxed ? this.store.putRelaxed("uploads", row) : this.store.put("uploads", row)).catch(function () {});
  };

  Uploads.prototype.file = async function (item) {
    if (this.files[item.id]) return this.files[item.id];
    const row = await this.store.get("upload_files", item.id);
    if (row && row.file) this.files[item.id] = row.file;
    return row ? row.file : null;
  };

  // wake: the network came back, or the person asked: cut a backoff short.
  Uploads.prototype.kick = function (wake) {
    if (wake && this.wake) { const w = this.wake; this.wake = null; w(); }
    if (!this.hashing) this.hashLoop();
    if (!this.sending) this.sendLoop();
  };

  Uploads.prototype.sleep = function (ms) {
    const self = this;
    return new Promise(function (resolve) {
      const timer = setTimeout(done, ms);
      function done() { clearTimeout(timer); if (self.wake === done) self.wake = null; resolve(); }
      self.wake = done;
    });
  };

  Uploads.prototype.waitFor = function (item, why, detail) {
    item.waiting = why;
    if (detail !== undefined) item.detail = detail;
    this.onChange(item, "progress");
  };

  Uploads.prototype.hashLoop = async function () {
    this.hashing = true;
    try {
      let item;
      while ((item = this.items.find(function (i) { return i.state === "hashing"; }))) await this.hash(item);
    } finally {
      this.hashing = false;
    }
    if (!this.sending) this.sendLoop();
  };

  Uploads.prototype.hash = async function (item) {
    const self = this;
    const file = await this.file(item);
    if (!file) return this.lose(item, null);
    let sha;
    try {
      sha = await sha256Blob(file, { onProgress: function (n) { item.hashed = n; self.onChange(item, "progress"); } });
    } catch (err) {
      return this.lose(item, err);
    }
    if (item.state !== "hashing") return;  // cancelled meanwhile
    item.sha256 = sha;
    item.state = "queued";
    await this.save(item);
    this.onChange(item, "state");
    if (!this.sending) this.sendLoop();
  };

  Uploads.prototype.sendLoop = async function () {
    const self = this;
    this.sending = true;
    try {
      let item;
      while ((item = this.items.find(function (i) { return SENDING.indexOf(i.state) >= 0; }))) {
        if (!navigator.onLine) {
          this.waitFor(item, "offline");
          await this.sleep(5000);  // the online event wakes us sooner
          continue;
        }
        try {
          await this.locked(item, function () { return self.send(item); });
        } catch (err) {
          if (err === LOCKED) { await this.sleep(2000); continue; }
          // A dropped connection, a timeout, a 5xx, a lost answer: ask the server where to
          // resume before sending again.
          this.failures += 1;
          item.needsOffset = true;
          const auth = err instanceof HttpError && (err.status === 401 || err.status === 403);
          this.waitFor(item, auth ? "signin" : navigator.onLine ? "retry" : "offline");
          const base = Math.min(UPLOAD_BACKOFF_MAX_MS, 1000 * Math.pow(2, this.failures - 1));
          await this.sleep(base * (0.5 + Math.random()));
        }
      }
    } finally {
      this.sending = false;
    }
  };

  // One tab at a time sends an upload (two would only trade 409s).
  Uploads.prototype.locked = function (item, fn) {
    if (!navigator.locks) return fn();
    return navigator.locks.request("fieldcraft-upload-" + item.id, { ifAvailable: true }, function (lock) {
      return lock ? fn() : Promise.reject(LOCKED);
    });
  };

  Uploads.prototype.send = async function (item) {
    const file = await this.file(item);
    if (!file) return this.lose(item, null);
    while (SENDING.indexOf(item.state) >= 0) {
      if (!item.upload) {
        const r = await call("POST", this.urlForTask(item.task), JSON.stringify({
          filename: item.name, size: item.size, sha256: item.sha256, kind: item.kind, episode: item.episode || "",
        }), { "Content-Type": "application/json" }, 30000);
        if (r.status === 200 && r.data.recording) return this.finish(item, r.data.recording);
        if (r.status !== 201 || !r.data.id) return this.answer(item, r);
        item.upload = r.data.id;
        item.offset = r.data.offset || 0;
        item.needsOffset = false;
        item.state = "sending";
        await this.save(item);
        this.progressed(item);
        continue;
      }
      if (item.needsOffset) {
        const r = await call("GET", this.urlForUpload(item.upload), undefined, null, 20000);
        // Gone (expired), or already complete (its answer was lost): starting again finds
        // the pending upload or the stored recording by content.
        if (r.status === 404 || (r.status === 200 && r.data.recording)) { item.upload = null; continue; }
        if (r.status !== 200) return this.answer(item, r);
        item.offset = r.data.offset;
        item.needsOffset = false;
        this.progressed(item);
        continue;
      }
      if (item.offset >= item.size) throw new HttpError(0, "the server is finishing the upload");
      const start = item.offset;
      const end = Math.min(item.size, start + this.chunk);
      if (end === item.size && item.episode) await this.episodeFirst(item.episode);
      const r = await call("PUT", this.urlForUpload(item.upload), file.slice(start, end), {
        "Content-Type": "application/octet-stream", "Content-Range": "bytes " + start + "-" + (end - 1) + "/" + item.size,
      }, 30000 + (end - start) / 25);
      if (r.status === 201 && r.data.recording) return this.finish(item, r.data.recording);
      if (r.status === 200 && typeof r.data.offset === "number") {
        item.offset = r.data.offset;
        this.failures = 0;
        await this.save(item, true);
        this.progressed(item);
      } else if (r.status === 409 && typeof r.data.offset === "number") {
        item.offset = r.data.offset;  // not where the server is: go on from where it is
        this.progressed(item);
      } else if (r.status === 413 && r.data.limit) {
        this.chunk = Math.min(this.chunk, r.data.limit);
      } else if (r.status === 404) {
        item.upload = null;
      } else {
        return this.answer(item, r);
      }
    }
  };

  Uploads.prototype.progressed = function (item) {
    item.waiting = "";
    this.onChange(item, "progress");
  };

  // An answer that is not progress: final refusals stop this file, the rest are retried.
  Uploads.prototype.answer = function (item, r) {
    if (r.status === 400 || r.status === 422 || r.status === 404) {
      return this.settle(item, "refused", {
        detail: r.status === 404 ? "This task is no longer open to you on the server." : r.data.detail || "Refused (" + r.status + ").",
      });
    }
    throw new HttpError(r.status, "The server answered " + r.status + "; retrying.");
  };

  // Wait (a minute at most) for the capture this recording belongs to to reach the server,
  // so that the last chunk links the recording to its episode.
  Uploads.prototype.episodeFirst = async function (uuid) {
    for (let i = 0; i < 30; i++) {
      if (!(await this.store.get("outbox", uuid))) return;
      if (this.sync) this.sync.run(false);
      await delay(2000);
    }
  };

  Uploads.prototype.finish = function (item, recording) {
    return this.settle(item, "done", { recording: recording, offset: item.size, sha256: recording.sha256 || item.sha256 });
  };

  Uploads.prototype.lose = function (item, err) {
    return this.settle(item, "lost", {
      detail: "The tablet can no longer read this file" + (err && err.name ? " (" + err.name + ")" : "") + "; attach it again.",
    });
  };

  Uploads.prototype.settle = async function (item, state, fields) {
    Object.assign(item, fields, { state: state, waiting: "", finished_at: Date.now() });
    if (state === "done") {
      delete this.files[item.id];
      await this.store.dropUpload(item.id, Object.assign({}, item)).catch(function () {});
    } else {
      await this.save(item);
    }
    this.onChange(item, state === "done" ? "done" : "state");
  };

  // Forget an upload: cancel it while pending, or dismiss what it ended with.
  Uploads.prototype.remove = async function (id) {
    const item = this.items.find(function (i) { return i.id === id; });
    if (!item) return;
    item.state = "removed";
    this.items.splice(this.items.indexOf(item), 1);
    delete this.files[id];
    await this.store.dropUpload(id).catch(function () {});
    this.onChange(null, "state");
  };

  // Send a refused file again from the start (hashed again: it may have changed on disk).
  Uploads.prototype.retry = async function (id) {
    const item = this.items.find(function (i) { return i.id === id; });
    if (!item || item.state !== "refused") return;
    Object.assign(item, { state: "hashing", sha256: null, upload: null, offset: 0, hashed: 0, detail: "", finished_at: null });
    await this.save(item);
    this.onChange(item, "state");
    this.kick(true);
  };

  // The task's recordings on the server, with their validation.
  Uploads.prototype.list = async function (taskId) {
    const r = await call("GET", this.urlForTask(taskId), undefined, null, 20000);
    if (r.status !== 200 || !Array.isArray(r.data)) throw new HttpError(r.status, "Could not load the recordings.");
    return r.data;
  };

  window.FieldSync = {
    Sync: Sync, Uploads: Uploads, csrfToken: csrfToken,
    sha256Blob: sha256Blob, Sha256: Sha256, lengthBytes: lengthBytes,
  };
})();
