// The labelling pages, fast from the keyboard alone; the one keydown listener of the page.
// No inline scripts (CSP): this file reads the form's data attributes.
// Player keys (player.js, wherever an episode is played, the review page too): p plays/pauses,
// ←/→ steps one frame back/forward (and pauses), [/] slows down/speeds up.
// Label keys (the labelling page, when the answer is yours to give): 1–9 pick a value in the
// highlighted row and move down, 0 clears it, ↑/↓ (or k/j) change row, s/f/u set the outcome,
// m focuses the failure mode, n the notes, r toggles "send to a reviewer", Enter submits (and
// the server opens the next episode), Esc skips (or leaves a text field).
// Keys typed into a text field stay text.
(function () {
  "use strict";
  const form = document.querySelector("form[data-label-form]");
  const editable = Boolean(form) && !form.hasAttribute("data-readonly");
  const rows = editable ? Array.from(form.querySelectorAll("[data-dim-row]")) : [];
  const skipForm = document.querySelector("form[data-skip-form]");
  const mode = editable ? form.querySelector("[data-failure-mode]") : null;
  const seconds = editable ? form.querySelector("[data-seconds]") : null;
  const started = performance.now();
  let active = 0;
  let sent = false;

  function setActive(i) {
    if (!rows.length) return;
    active = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (row, j) { row.classList.toggle("active", j === active); });
    rows[active].scrollIntoView({ block: "nearest" });
  }

  function pick(n) {
    const row = rows[active];
    if (!row) return;
    const radios = row.querySelectorAll("input[type=radio]");
    if (n < radios.length) {
      radios[n].checked = true;
      radios[n].dispatchEvent(new Event("change", { bubbles: true }));
      if (active < rows.length - 1) setActive(active + 1);
    }
  }

  function outcome(value) {
    const radio = form.querySelector('input[name="outcome"][value="' + value + '"]');
    if (radio) { radio.checked = true; sync(); }
  }

  function sync() {
    const checked = form.querySelector('input[name="outcome"]:checked');
    const failure = checked && checked.value === "failure";
    if (mode) {
      mode.disabled = !failure;
      if (!failure) mode.value = "";
    }
  }

  function submit() {
    if (sent) return;
    sent = true;
    form.requestSubmit();
  }

  function typing(target) {
    if (!(target instanceof HTMLElement)) return false;
    if (target.isContentEditable || target.matches("textarea, select")) return true;
    return target.matches("input") && !/^(radio|checkbox|range|button|submit|reset|image|color|file)$/.test(target.type);
  }

  // The player's keys; before it is ready, p still plays/pauses a stored media video.
  function playerKey(key) {
    const player = window.FieldcraftPlayer;
    if (player && player.key(key)) return true;
    if (key !== "p") return false;
    const video = document.querySelector("video[data-label-video]");
    if (!video) return false;
    if (video.paused) video.play(); else video.pause();
    return true;
  }

  function labelKey(key) {
    if (/^[0-9]$/.test(key)) pick(Number(key));
    else if (key === "ArrowDown" || key === "j") setActive(active + 1);
    else if (key === "ArrowUp" || key === "k") setActive(active - 1);
    else if (key === "s") outcome("success");
    else if (key === "f") outcome("failure");
    else if (key === "u") outcome("unknown");
    else if (key === "m" && mode) { outcome("failure"); mode.focus(); }
    else if (key === "n") form.querySelector("textarea[name=notes]").focus();
    else if (key === "r") { const flag = form.querySelector("input[name=flagged]"); flag.checked = !flag.checked; }
    else if (key === "Enter") submit();
    else return false;
    return true;
  }

  if (editable) {
    form.addEventListener("submit", function () {
      if (seconds) seconds.value = ((performance.now() - started) / 1000).toFixed(1);
      sent = true;
    });
    form.addEventListener("change", function (event) {
      if (event.target.name === "outcome") sync();
    });
    rows.forEach(function (row, i) {
      row.addEventListener("click", function () { setActive(i); });
    });
  }

  document.addEventListener("keydown", function (event) {
    const target = event.target;
    const inText = typing(target);
    if (event.key === "Escape") {
      if (inText) { event.preventDefault(); target.blur(); return; }
      if (editable && skipForm && !sent) { event.preventDefault(); sent = true; skipForm.requestSubmit(); }
      return;
    }
    if (inText) {
      const submitKey = editable && form.contains(target) && event.key === "Enter" && (target.tagName === "SELECT" || event.ctrlKey || event.metaKey);
      if (submitKey) { event.preventDefault(); submit(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const handled = playerKey(event.key) || (editable && labelKey(event.key));
    if (handled) event.preventDefault();
  });

  if (editable) {
    sync();
    setActive(0);
    form.dataset.keys = "ready";
  }
})();
