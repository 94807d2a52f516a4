// The player of an episode's converted recording: every camera side by side under one
// scrubber, the state and action traces beneath with a cursor at the video's time, and the
// capture report beside them. No inline scripts (CSP): each [data-player] names its JSON
// route (data-playback-url), polled every 2 s while the recording is being converted.
//
// One clock: the first video is the master. Playing, the others play along at the same rate
// and are put back on the master's time when they drift by more than half a frame. Paused,
// every video shows the same frame: frame k is shown from k/fps to (k+1)/fps, and a seek goes
// to the middle of it, (k + 0.5)/fps. Seeking to k/fps itself lands one frame early in Chromium
// for some k (k/fps rounds to the microsecond below the frame's timestamp, e.g. 17/30 s), the
// middle is half a frame from either edge, so every video lands on frame k.
//
// Keys are label.js's (one keydown listener for the page): it calls FieldcraftPlayer.key()
// with p (play/pause), ←/→ (one frame back/forward, pauses), [/] (slower/faster, 0.25×–4×).
(function () {
  "use strict";
  const RATES = [0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4];
  const POLL_MS = 2000;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  const players = [];
  let current = null;

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(function ([name, value]) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    });
    (children || []).forEach(function (child) { node.appendChild(child); });
    return node;
  }

  function kbd(text) { return el("kbd", { text: text }); }

  function ms(value) { return value === null || value === undefined ? "—" : Number(value).toFixed(1) + " ms"; }

  function createPlayer(root) {
    const url = root.dataset.playbackUrl;
    const status = root.querySelector("[data-player-status]");
    const p = { root: root, ready: false, videos: [], fps: 30, length: 0, frame: 0, playing: false, rate: 3 };
    let scrubber = null, timeText = null, rateText = null, playButton = null, plot = null;
    let cursorWanted = null, cursorShown = null, cursorFrame = 0, cursorBusy = false;

    function say(text, kind) {
      status.textContent = text;
      status.className = "player-status " + (kind || "muted");
      status.hidden = !text;
    }

    function load() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("the server answered " + response.status);
          return response.json();
        })
        .then(function (data) {
          root.dataset.status = data.status;
          if (data.status === "converting") {
            say("Converting the recording for playback…");
            window.setTimeout(load, POLL_MS);
          } else if (data.status === "ready") {
            build(data);
          } else {
            say(data.message || "No recording.", data.status === "failed" ? "error" : "muted");
          }
        })
        .catch(function (error) {
          say("The recording could not be loaded (" + error.message + "); trying again…", "error");
          window.setTimeout(load, POLL_MS * 3);
        });
    }

    function frameAt(t) { return Math.max(0, Math.min(p.length - 1, Math.floor(t * p.fps + 1e-6))); }
    function timeOf(k) { return (k + 0.5) / p.fps; }
    function master() { return p.videos[0]; }

    function show() {
      scrubber.value = String(p.frame);
      timeText.textContent = (p.frame / p.fps).toFixed(3) + " s · frame " + p.frame + " / " + (p.length - 1);
      root.dataset.frame = String(p.frame);
      playButton.textContent = p.playing ? "❚❚ Pause " : "▶ Play ";
      playButton.appendChild(kbd("p"));
      root.dataset.playing = p.playing ? "1" : "0";
    }

    // The traces' cursor: one relayout per animation frame at most, never two in flight.
    function cursor(t) {
      cursorWanted = t;
      if (!plot || cursorFrame) return;
      cursorFrame = window.requestAnimationFrame(function () {
        cursorFrame = 0;
        if (cursorBusy || cursorWanted === cursorShown) return;
        const t = cursorWanted;
        cursorBusy = true;
        Promise.resolve(window.Plotly.relayout(plot, { "shapes[0].x0": t, "shapes[0].x1": t })).then(function () {
          cursorShown = t;
          cursorBusy = false;
          plot.dataset.cursor = String(t);
          if (cursorWanted !== cursorShown) cursor(cursorWanted);
        });
      });
    }

    function seek(k) {
      k = Math.max(0, Math.min(p.length - 1, Math.round(k)));
      p.frame = k;
      root.dataset.seeking = "1";
      p.videos.forEach(function (video) { video.currentTime = timeOf(k); });
      show();
      cursor(k / p.fps);
    }

    // A seek that another interrupts fires no "seeked": done when no video is seeking.
    function settle() {
      if (p.videos.every(function (video) { return !video.seeking; })) delete root.dataset.seeking;
    }

    function tick() {
      if (!p.playing) return;
      const lead = master();
      const t = lead.currentTime;
      const tolerance = 0.5 / p.fps;
      p.videos.slice(1).forEach(function (video) {
        if (!video.seeking && Math.abs(video.currentTime - t) > tolerance) {
          video.currentTime = t;
          root.dataset.corrections = String(Number(root.dataset.corrections || 0) + 1);
        }
      });
      p.frame = frameAt(t);
      show();
      cursor(t);
      if (lead.ended || t >= lead.duration) { pause(); return; }
      window.requestAnimationFrame(tick);
    }

    function play() {
      if (p.playing) return;
      if (p.frame >= p.length - 1) seek(0);
      const t = timeOf(p.frame);
      p.playing = true;
      p.videos.forEach(function (video) {
        video.playbackRate = RATES[p.rate];
        if (Math.abs(video.currentTime - t) > 1e-3) video.currentTime = t;
        const started = video.play();
        if (started && started.catch) started.catch(function () { /* paused before it started */ });
      });
      show();
      window.requestAnimationFrame(tick);
    }

    function halt() {
      const wasPlaying = p.playing;
      p.playing = false;
      p.videos.forEach(function (video) { video.pause(); });
      return wasPlaying;
    }

    // Stop every video and show the master's frame on all of them.
    function pause() {
      if (halt()) seek(frameAt(master().currentTime));
      else show();
    }

    function toggle() { if (p.playing) pause(); else play(); }
    function step(d) { halt(); seek(p.frame + d); }

    function setRate(i) {
      p.rate = Math.max(0, Math.min(RATES.length - 1, i));
      p.videos.forEach(function (video) { video.playbackRate = RATES[p.rate]; });
      rateText.textContent = RATES[p.rate] + "×";
      root.dataset.rate = String(RATES[p.rate]);
    }

    function drawTraces(box, data) {
      if (!window.Plotly || !data.traces || !data.traces.t || !data.traces.t.length) {
        box.appendChild(el("p", { class: "muted small", text: "No state or action to plot." }));
        return null;
      }
      const t = data.traces.t;
      const joints = data.joints || [];
      const lines = [];
      [["observation.state", "y", "solid"], ["action", "y2", "dot"]].forEach(function ([column, axis, dash]) {
        (data.traces[column] || []).forEach(function (values, i) {
          const name = joints[i] || "joint " + (i + 1);
          lines.push({
            x: t, y: values, type: "scatter", mode: "lines", xaxis: "x", yaxis: axis,
            name: name, legendgroup: name, showlegend: column === "observation.state",
            line: { color: COLORS[i % COLORS.length], width: 1.5, dash: dash },
            hovertemplate: name + " (" + (column === "action" ? "action" : "state") + ") %{y:.4f} at %{x:.3f} s<extra></extra>",
          });
        });
      });
      const layout = {
        height: 300, margin: { l: 48, r: 8, t: 8, b: 32 },
        grid: { rows: 2, columns: 1, pattern: "coupled", roworder: "top to bottom" },
        xaxis: { title: { text: "time (s)" }, range: [0, Math.max(t[t.length - 1], 1 / data.fps)] },
        yaxis: { title: { text: "state" } }, yaxis2: { title: { text: "action" } },
        legend: { orientation: "h", y: 1.08, x: 0 },
        shapes: [{ type: "line", xref: "x", yref: "paper", x0: 0, x1: 0, y0: 0, y1: 1, line: { color: "#e4572e", width: 2 } }],
        paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fbfcfd",
      };
      const div = el("div", { class: "player-plot", "data-player-traces": "" });
      box.appendChild(div);
      window.Plotly.newPlot(div, lines, layout, { displayModeBar: false, responsive: true });
      div.on("plotly_click", function (event) {
        if (event && event.points && event.points.length) { halt(); seek(Math.round(event.points[0].x * p.fps)); }
      });
      return div;
    }

    function report(data) {
      const rep = data.report || {};
      const streams = rep.streams || [];
      const table = el("table", { class: "data compact player-report", "data-player-report": "" });
      table.appendChild(el("thead", {}, [el("tr", {}, ["Stream", "Match", "Stale", "p95 skew", "Worst"].map(function (h) { return el("th", { text: h }); }))]));
      const body = el("tbody");
      streams.forEach(function (s) {
        const bad = s.match_rate < 1 || s.stale > 0;
        body.appendChild(el("tr", bad ? { class: "differs" } : {}, [
          el("td", { text: s.name + (s.kind && s.kind !== s.name ? " (" + s.kind + ")" : ""), title: s.topic || "" }),
          el("td", { text: (100 * (s.match_rate || 0)).toFixed(1) + " %" }),
          el("td", { text: String(s.stale || 0) }),
          el("td", { text: ms(s.skew_p95_ms) }),
          el("td", { text: ms(s.skew_worst_ms) }),
        ]));
      });
      table.appendChild(body);
      const verdict = rep.verdict || "unknown";
      const ok = verdict === "synced";
      const wrap = el("div", { class: "player-capture" }, [
        el("p", {}, [el("strong", { text: "Capture report " }), el("span", { class: "badge " + (ok ? "ok" : "bad"), "data-player-verdict": "", text: verdict.replace(/_/g, " ") })]),
        table,
      ]);
      if (data.parts > 1) wrap.appendChild(el("p", { class: "small muted", text: "The recording split into " + data.parts + " synchronised parts; this is the first." }));
      return wrap;
    }

    function build(data) {
      p.fps = data.fps;
      p.length = data.length;
      say("Loading the videos…");
      const row = el("div", { class: "player-videos" });
      data.cameras.forEach(function (camera) {
        const video = el("video", { muted: "", preload: "auto", playsinline: "", width: String(camera.width), height: String(camera.height), "data-camera": camera.key });
        video.muted = true;
        video.src = camera.url;
        video.addEventListener("seeked", settle);
        video.addEventListener("error", function () {
          say("This browser cannot play the " + camera.name + " video (" + ((video.error && video.error.message) || "decode error") + ").", "error");
        });
        p.videos.push(video);
        row.appendChild(el("figure", {}, [video, el("figcaption", { text: camera.name })]));
      });
      playButton = el("button", { type: "button", class: "player-play", "data-player-play": "" });
      scrubber = el("input", { type: "range", min: "0", max: String(Math.max(0, p.length - 1)), step: "1", value: "0", "aria-label": "Frame", "data-player-scrubber": "" });
      timeText = el("output", { class: "player-time", "data-player-time": "" });
      rateText = el("span", { class: "player-rate", "data-player-rate": "" });
      const bar = el("div", { class: "player-bar" }, [
        playButton, scrubber, timeText,
        el("span", { class: "player-speed" }, [kbd("["), rateText, kbd("]")]),
        el("span", { class: "small muted" }, [kbd("←"), kbd("→"), document.createTextNode(" frame")]),
      ]);
      const lower = el("div", { class: "player-lower" });
      root.appendChild(row);
      root.appendChild(bar);
      root.appendChild(lower);
      const traces = el("div", { class: "player-traces" });
      lower.appendChild(traces);
      lower.appendChild(report(data));
      plot = drawTraces(traces, data);
      playButton.addEventListener("click", toggle);
      scrubber.addEventListener("input", function () { halt(); seek(Number(scrubber.value)); });
      setRate(p.rate);
      show();
      Promise.all(p.videos.map(function (video) {
        return new Promise(function (resolve) {
          if (video.readyState >= 2) resolve();
          else video.addEventListener("loadeddata", resolve, { once: true });
        });
      })).then(function () {
        seek(0);
        say("");
        p.ready = true;
        root.dataset.state = "ready";
      });
    }

    p.key = function (key) {
      if (!p.ready) return false;
      if (key === "p") toggle();
      else if (key === "ArrowLeft") step(-1);
      else if (key === "ArrowRight") step(1);
      else if (key === "[") setRate(p.rate - 1);
      else if (key === "]") setRate(p.rate + 1);
      else return false;
      return true;
    };
    p.load = load;
    ["pointerdown", "focusin"].forEach(function (type) {
      root.addEventListener(type, function () { current = p; });
    });
    return p;
  }

  document.querySelectorAll("[data-player]").forEach(function (root) {
    const player = createPlayer(root);
    players.push(player);
    // On the review page there is one per episode: load each when it comes into view.
    if ("IntersectionObserver" in window) {
      const seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); player.load(); }
      }, { rootMargin: "200px" });
      seen.observe(root);
    } else {
      player.load();
    }
  });

  window.FieldcraftPlayer = {
    players: players,
    // A key for the player last used (else the first ready one); true when it took it.
    key: function (key) {
      const player = current && current.ready ? current : players.find(function (p) { return p.ready; });
      return player ? player.key(key) : false;
    },
  };
})();
