// Fieldcraft field app: the IndexedDB stores the tablet works from.
//   outbox    records waiting for the server (key: uuid), written with strict durability
//   sent      records the server confirmed, with its answer (kept a week for the log)
//   conflicts records the server refused (409 and other permanent refusals), shown to the user
//   tasks     the team's tasks as last received, plus what changed since the tablet saw them
//   meta      last sync time, failure taxonomy, blocking reasons
//   uploads       recordings being uploaded (key: local id): task, name, size, sha256, server
//                 upload id, confirmed offset, state; kept a week after they are done
//   upload_files  the File of each upload still to send (written once, apart from the row that
//                 changes with every chunk, so the file's bytes are never written twice)
//   takes         a running take per task and target (key: "task:target"), its start time
(function () {
  "use strict";

  const STORES = ["outbox", "sent", "conflicts", "tasks", "meta", "uploads", "upload_files", "takes"];

  function promisify(request) {
    return new Promise(function (resolve, reject) {
      request.onsuccess = function () { resolve(request.result); };
      request.onerror = function () { reject(request.error); };
    });
  }

  function open(userId) {
    return new Promise(function (resolve, reject) {
      const request = indexedDB.open("fieldcraft-field-" + userId, 2);
      request.onupgradeneeded = function (event) {
        const db = request.result;
        if (event.oldVersion < 1) {
          const outbox = db.createObjectStore("outbox", { keyPath: "uuid" });
          outbox.createIndex("seq", "seq");
          db.createObjectStore("sent", { keyPath: "uuid" });
          db.createObjectStore("conflicts", { keyPath: "uuid" });
          db.createObjectStore("tasks", { keyPath: "id" });
          db.createObjectStore("meta", { keyPath: "key" });
        }
        if (event.oldVersion < 2) {
          db.createObjectStore("uploads", { keyPath: "id" });
          db.createObjectStore("upload_files", { keyPath: "id" });
          db.createObjectStore("takes", { keyPath: "key" });
        }
      };
      request.onsuccess = function () {
        const db = request.result;
        // Let a newer version of the app (another tab, after a deploy) upgrade the database.
        db.onversionchange = function () { db.close(); };
        resolve(new Store(db));
      };
      request.onerror = function () { reject(request.error); };
      request.onblocked = function () { reject(new Error("The field database is open in an older tab.")); };
    });
  }

  function Store(db) { this.db = db; }

  // Run fn(stores) in one transaction; resolve with its value once the transaction commits.
  Store.prototype.tx = function (names, mode, fn, durability) {
    const db = this.db;
    return new Promise(function (resolve, reject) {
      const options = durability ? { durability: durability } : undefined;
      const t = db.transaction(names, mode, options);
      const stores = {};
      names.forEach(function (n) { stores[n] = t.objectStore(n); });
      let value;
      Promise.resolve(fn(stores)).then(function (v) { value = v; }, function (e) { t.abort(); reject(e); });
      t.oncomplete = function () { resolve(value); };
      t.onerror = function () { reject(t.error); };
      t.onabort = function () { reject(t.error || new Error("transaction aborted")); };
    });
  };

  Store.prototype.all = function (name) {
    return this.tx([name], "readonly", function (s) { return promisify(s[name].getAll()); });
  };

  Store.prototype.get = function (name, key) {
    return this.tx([name], "readonly", function (s) { return promisify(s[name].get(key)); });
  };

  Store.prototype.put = function (name, value) {
    return this.tx([name], "readwrite", function (s) { s[name].put(value); }, "strict");
  };

  Store.prototype.remove = function (name, key) {
    return this.tx([name], "readwrite", function (s) { s[name].delete(key); });
  };

  // A write that may be lost in a crash without harm (an upload's offset: the server has it).
  Store.prototype.putRelaxed = function (name, value) {
    return this.tx([name], "readwrite", function (s) { s[name].put(value); }, "relaxed");
  };

  // A new upload: its row and its file, together or not at all.
  Store.prototype.addUpload = function (row, file) {
    return this.tx(["uploads", "upload_files"], "readwrite", function (s) {
      s.uploads.put(row);
      s.upload_files.put({ id: row.id, file: file });
    }, "strict");
  };

  // Drop an upload's file; keep `row` as its final state, or drop the row too when none.
  Store.prototype.dropUpload = function (id, row) {
    return this.tx(["uploads", "upload_files"], "readwrite", function (s) {
      s.upload_files.delete(id);
      if (row) s.uploads.put(row); else s.uploads.delete(id);
    }, "strict");
  };

  Store.prototype.outbox = function () {
    return this.tx(["outbox"], "readonly", function (s) {
      return promisify(s.outbox.index("seq").getAll());
    });
  };

  Store.prototype.meta = function (key) {
    return this.get("meta", key).then(function (row) { return row ? row.value : undefined; });
  };

  Store.prototype.setMeta = function (key, value) {
    return this.put("meta", { key: key, value: value });
  };

  // Move a record out of the outbox into `sent` or `conflicts` atomically.
  Store.prototype.settle = function (uuid, target, row) {
    return this.tx(["outbox", target], "readwrite", function (s) {
      s.outbox.delete(uuid);
      s[target].put(row);
    }, "strict");
  };

  Store.prototype.pruneSent = function (olderThanMs) {
    const limit = Date.now() - olderThanMs;
    return this.tx(["sent"], "readwrite", function (s) {
      return promisify(s.sent.getAll()).then(function (rows) {
        rows.forEach(function (r) { if ((r.confirmed_at || 0) < limit) s.sent.delete(r.uuid); });
      });
    });
  };

  function uuid4() {
    if (window.crypto && typeof window.crypto.randomUUID === "function") return window.crypto.randomUUID();
    // Plain-HTTP pages have no randomUUID; getRandomValues is available everywhere.
    const b = window.crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.prototype.map.call(b, function (x) { return (x + 0x100).toString(16).slice(1); }).join("");
    return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
  }

  window.FieldStore = { open: open, uuid4: uuid4, STORES: STORES };
})();
